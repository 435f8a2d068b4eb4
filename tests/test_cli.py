"""The `coevo` command-line contract that later tools rely on (issue 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import TASK_NAMES

ROOT = Path(__file__).resolve().parent.parent

from cli_capture import run_cli


def test_tasks_list_json_has_one_row_per_task(capsys):
    code, out, _ = run_cli(capsys, "tasks", "list", "--json")
    rows = [row for row in json.loads(out) if row["kind"] == "heuristic"]
    assert code == 0
    assert [row["name"] for row in rows] == list(TASK_NAMES)
    for row in rows:
        assert set(row) == {"name", "kind", "signature", "splits", "reference"}
        assert row["splits"] == ["search", "val", "test"]
        assert row["reference"]


def test_tasks_eval_json_contract_for_a_valid_heuristic(capsys):
    seed = ROOT / "heuristics" / "seed" / "kp_construct.py"
    code, out, _ = run_cli(
        capsys, "tasks", "eval", "kp_construct", str(seed), "--split", "search", "--limit", "4", "--json"
    )
    result = json.loads(out)
    assert code == 0
    assert set(result) == {"task", "split", "valid", "objective", "gap_pct", "n_instances", "reason", "seconds"}
    assert result["valid"] is True and result["reason"] is None
    assert (result["task"], result["split"], result["n_instances"]) == ("kp_construct", "search", 4)
    assert result["objective"] > 0  # KP reports the natural (maximised) value
    assert 0 <= result["gap_pct"] < 5


def test_tasks_eval_exits_zero_for_an_invalid_heuristic(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):\n    return -1\n"
    )
    code, out, _ = run_cli(capsys, "tasks", "eval", "tsp_construct", str(bad), "--limit", "2", "--json")
    result = json.loads(out)
    assert code == 0
    assert result["valid"] is False
    assert result["objective"] is None and result["gap_pct"] is None
    assert "-1" in result["reason"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["tasks", "eval", "no_such_task", "x.py"], "unknown task 'no_such_task'"),
        (["tasks", "eval", "tsp_construct", "/no/such/file.py"], "heuristic file not found"),
        (["tasks", "eval", "tsp_construct", "x.py", "--split", "train"], "unknown split 'train'"),
        (["tasks", "eval", "tsp_construct", "x.py", "--limit", "0"], "--limit"),
        (["tasks", "eval", "--bogus"], "No such option"),
        (["tasks", "baselines", "no_such_task"], "unknown task"),
    ],
)
def test_bad_usage_is_one_line_and_exit_two(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err


def test_console_script_returns_exit_code_two_on_bad_usage():
    completed = subprocess.run(
        [sys.executable, "-m", "coevo.cli", "tasks", "eval", "nope", "x.py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().startswith("coevo: error: unknown task 'nope'")


def test_baselines_table_reports_gaps_on_a_subset(capsys):
    code, out, _ = run_cli(capsys, "tasks", "baselines", "kp_construct", "--limit", "3")
    assert code == 0
    assert "greedy" in out and "seed" in out
    # Gaps are computed against the shipped references of the same three instances.
    rows = [line for line in out.splitlines() if "greedy" in line]
    assert len(rows) == 3 and all("-" not in row.split("│")[5] for row in rows)


PROBE = "coevo.evaluate.probe:ProbeTask"
FAKE_VERDICT = f"\r{PROBE} [search, 4 instances] valid; objective 5.\x1b[K\x1b[2A"
"""A candidate's error message that, printed raw, returns the cursor and draws a fake verdict over the real one."""


def eval_in_a_process(tmp_path: Path, message: str, *options: str) -> subprocess.CompletedProcess[bytes]:
    """`coevo tasks eval` on a candidate that raises ValueError(`message`, an expression), its
    output kept as bytes: what a terminal would receive."""
    heuristic = tmp_path / "raises.py"
    heuristic.write_text(f"def pick(values):\n    raise ValueError({message})\n")
    argv = ["tasks", "eval", PROBE, str(heuristic), "--split", "search", *options]
    return subprocess.run([sys.executable, "-m", "coevo.cli", *argv], capture_output=True, timeout=300)


def test_a_reason_with_a_lone_surrogate_is_printed_as_an_escape(tmp_path):
    completed = eval_in_a_process(tmp_path, "'half of a pair ' + chr(0xD800)")
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")
    assert completed.stdout.decode().startswith(f"{PROBE} [search, 4 instances] INVALID: instance 1/4 (n8): pick raised ValueError")
    assert "half of a pair \\ud800; objective n/a" in completed.stdout.decode()
    exact = json.loads(eval_in_a_process(tmp_path, "'half of a pair ' + chr(0xD800)", "--json").stdout)
    assert exact["reason"].endswith("half of a pair \ud800")  # --json stays exact


def test_a_reason_cannot_draw_over_the_verdict(tmp_path):
    completed = eval_in_a_process(tmp_path, repr(FAKE_VERDICT))
    out = completed.stdout.decode()
    assert completed.returncode == 0
    assert "\r" not in out and "\x1b" not in out and len(out.splitlines()) == 1
    assert f"ValueError: \\r{PROBE} [search, 4 instances] valid; objective 5.\\x1b[K\\x1b[2A" in out
    exact = json.loads(eval_in_a_process(tmp_path, repr(FAKE_VERDICT), "--json").stdout)
    assert exact["reason"].endswith(FAKE_VERDICT)
