"""The circle-packing head to head (experiments/peers/packing_*.py) without any peer installed.

The peers' evaluator wrappers must give coevo's verdict on a packing, valid or not (the verifier is
coevo's for every system); the table is checked on hand-made cell records.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tasks.circle_packing import RECORDS

PEERS_DIR = Path(__file__).resolve().parents[1] / "experiments" / "peers"
sys.path.insert(0, str(PEERS_DIR))  # packing_rows and packing_table import their siblings by name

TASK = "circle_packing_26"
RECORD = RECORDS[26]
ONE_ULP_OVERLAP = """import numpy as np


def pack_circles(n):
    centres = np.tile([0.5, 0.9], (n, 1))
    radii = np.zeros(n)
    centres[0], centres[1] = [0.3, 0.5], [0.7, 0.5]
    radii[:2] = 0.2  # in float64, 0.7 - 0.3 is a hair under 0.2 + 0.2: they overlap by rounding alone
    return centres, radii
"""


import openevolve_evaluator  # noqa: E402
import openevolve_peer  # noqa: E402
import packing_rows  # noqa: E402
import packing_table  # noqa: E402
import peer_cli  # noqa: E402
import scoring  # noqa: E402
import table  # noqa: E402


def _coevo_verdict(code: str):  # type: ignore[no-untyped-def]
    from coevo.evaluate import Evaluator

    with Evaluator(TASK, "search", workers=1) as evaluator:
        return evaluator.evaluate(code)


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("programs")
    codes = {"seed": scoring.seed_program(TASK), "overlap": ONE_ULP_OVERLAP}
    for name, code in codes.items():
        (folder / f"{name}.py").write_text(code)
    return {name: folder / f"{name}.py" for name in codes}


def test_openevolve_evaluator_gives_coevo_verdicts_on_packings(programs: dict[str, Path], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COEVO_PEER_TASK", TASK)
    monkeypatch.delenv(scoring.LOG_ENV, raising=False)
    evaluate = openevolve_evaluator.evaluate
    seed = _coevo_verdict(programs["seed"].read_text())
    assert seed.valid and evaluate(str(programs["seed"])) == {"combined_score": -seed.gap_pct, "valid": 1.0}
    overlap = _coevo_verdict(ONE_ULP_OVERLAP)
    assert not overlap.valid and "circles 0 and 1 overlap" in overlap.reason
    assert evaluate(str(programs["overlap"])) == {"combined_score": scoring.INVALID_SCORE, "valid": 0.0}


@pytest.mark.parametrize("name", ["seed", "overlap"])
def test_shinka_evaluation_script_gives_coevo_verdicts_on_packings(
    name: str, programs: dict[str, Path], tmp_path: Path
) -> None:
    command = [sys.executable, str(PEERS_DIR / "shinka_evaluate.py"), "--program_path", str(programs[name])]
    command += ["--results_dir", str(tmp_path / "results")]
    environment = {key: value for key, value in os.environ.items() if key != scoring.LOG_ENV}
    subprocess.run(command, check=True, timeout=120, env={**environment, "COEVO_PEER_TASK": TASK})
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    correct = json.loads((tmp_path / "results" / "correct.json").read_text())
    expected = _coevo_verdict(programs[name].read_text())
    assert correct["correct"] is expected.valid
    if expected.valid:
        assert metrics["public"]["gap_pct"] == pytest.approx(expected.gap_pct, rel=1e-12)
        assert metrics["combined_score"] == -metrics["public"]["gap_pct"] and correct["error"] is None
    else:
        assert metrics["combined_score"] == scoring.INVALID_SCORE and "circles 0 and 1 overlap" in correct["error"]


@pytest.mark.parametrize("name", [TASK, "tsp_construct"])
def test_peer_scoring_finds_a_task_where_coevo_registers_none(name: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The peers' venvs do not install coevo, so no task name is registered there."""
    monkeypatch.setattr(scoring, "TASK_NAMES", ())
    assert scoring.get_task(name).name == name
    with pytest.raises(KeyError, match="unknown task 'circle_packing_27'"):
        scoring.get_task("circle_packing_27")


def test_openevolve_is_told_the_task_only_when_asked(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(scoring.LOG_ENV, "restored after the test")
    argv = ["peer", "--task", TASK, "--base-url", "http://x/v1", "--model", "m", "--out", str(tmp_path)]
    flags = openevolve_peer.FLAGS
    monkeypatch.setattr(sys, "argv", [*argv, "--describe-task"])
    assert peer_cli.peer_arguments("doc", flags).describe_task is True
    monkeypatch.setattr(sys, "argv", argv)
    assert peer_cli.peer_arguments("doc", flags).describe_task is False
    message = scoring.task_message(TASK)
    assert "26 disjoint circles inside the unit square" in message and "def pack_circles(n: int)" in message


def test_coevo_arms_run_their_method_with_the_search_settings(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    commands: list[list[str]] = []
    monkeypatch.setattr(
        table.subprocess, "run", lambda command, **_: commands.append(command) or SimpleNamespace(returncode=3)
    )
    args = SimpleNamespace(evaluations=64, model="qwen-coder-0.5b", max_tokens=384, arms=packing_table.ARMS)
    outcome = table.run_coevo("coevo-eoh+es", TASK, 2, args, tmp_path)
    assert outcome["status"] == "failed" and outcome["error"].startswith("coevo run exited 3")
    (command,) = commands
    assert command[command.index("run") + 1].endswith("experiments/configs/circle_packing_26__eoh_es.toml")
    sets = [command[i + 1] for i, word in enumerate(command) if word == "--set"]
    assert sets == ["budget=64", "seed=2", "model=qwen-coder-0.5b", "llm.max_new_tokens=384", *packing_table.SEARCH]


def _cell(system: str, seed: int, best: float | None, **extra: object) -> dict[str, object]:
    gap = None if best is None else 100 * (RECORD - best) / RECORD
    return {
        "system": system, "task": TASK, "seed": seed, "status": "done", "val_objective": best, "val_gap": gap,
        "evaluations": 64, "llm_calls": 60 + seed, "prompt_tokens": 1000 * (seed + 1), "completion_tokens": 500,
        "wall_s": 100.0, "valid_share": 0.25, "cpu": "AMD EPYC", **extra,
    }  # fmt: skip


CELLS = [
    {"system": packing_rows.SEED, "task": TASK, "status": "done", "val_objective": 13 / 6, "val_gap": 17.8},
    _cell("openevolve", 0, 2.5),
    _cell("openevolve", 1, 2.6, cpu="Intel Xeon"),
    {"system": "openevolve", "task": TASK, "seed": 2, "status": "failed", "error": "openevolve exited 1: boom"},
    _cell("shinka", 0, None),
    {"system": "coevo-eoh+es", "task": TASK, "seed": 1, "status": "failed", "error": "coevo run exited 2: x"},
    {**_cell("shinka", 0, 2.9), "task": "circle_packing_32"},  # another task's record stays out
]


def test_packing_rows_show_each_seed_then_the_mean_of_the_finished_ones() -> None:
    blocks = packing_rows.packing_rows(CELLS, TASK, packing_table.SYSTEMS, [0, 1, 2, 3, 4], RECORD)
    assert [block["system"] for block in blocks] == [packing_rows.SEED, *packing_table.SYSTEMS]
    by_system = {block["system"]: block for block in blocks}
    openevolve = by_system["openevolve"]
    assert [run["status"] for run in openevolve["runs"]] == ["done", "done", "failed", "not yet run", "not yet run"]
    first = openevolve["runs"][0]
    assert first["gap_abs"] == pytest.approx(RECORD - 2.5) and first["tokens"] == 1500 and first["llm_calls"] == 60
    assert first["gap_pct"] == pytest.approx(100 * (RECORD - 2.5) / RECORD)
    assert openevolve["runs"][2]["note"] == "openevolve exited 1: boom" and openevolve["runs"][2]["best_sum"] is None
    mean = openevolve["mean"]
    assert mean["best_sum"] == {"mean": pytest.approx(2.55), "std": pytest.approx(math.sqrt(0.005)), "n": 2}
    assert mean["tokens"]["mean"] == 2000 and mean["llm_calls"]["mean"] == 60.5
    shinka = by_system["shinka"]
    assert shinka["runs"][0]["note"] == "no valid packing" and shinka["mean"]["best_sum"] is None
    assert shinka["mean"]["evaluations"]["n"] == 1
    assert all(run["status"] == "not yet run" for run in by_system["coevo-eoh"]["runs"])
    assert by_system["coevo-eoh"]["mean"] is None
    assert by_system[packing_rows.SEED]["runs"][0]["best_sum"] == 13 / 6
    json.dumps(blocks)


def test_packing_markdown_fills_only_measured_figures() -> None:
    blocks = packing_rows.packing_rows(CELLS, TASK, packing_table.SYSTEMS, [0, 1, 2, 3, 4], RECORD)
    intro = {"model": "m", "budget": 64, "max_tokens": 384}
    text = packing_rows.markdown(blocks, TASK, RECORD, intro, lambda s, seed: packing_table.cell_command(TASK, s, seed))
    lines = text.splitlines()
    assert "CPU (lscpu model name): AMD EPYC, Intel Xeon." in text and "record 2.6358627564" in text

    def line(start: str) -> str:
        return next(line for line in lines if line.startswith(start))

    assert line("| openevolve | 0 |").startswith(f"| openevolve | 0 | 2.5000000000 | {RECORD - 2.5:.10f} |")
    command = "python experiments/peers/packing_table.py --systems openevolve --seeds 3"
    assert line("| openevolve | 3 |") == f"| openevolve | 3 | not yet run | | | | | | | | `{command}` |"
    assert line("| openevolve | mean +- std |").startswith("| openevolve | mean +- std | 2.550000 +- 0.070711 |")
    assert line("| openevolve | mean +- std |").endswith("| 2 finished |")
    assert line("| shinka | mean +- std |").startswith("| shinka | mean +- std | - | - | - | 64 |")
    assert line("| coevo-eoh | mean +- std |").startswith("| coevo-eoh | mean +- std | not yet run |")
    assert line("| coevo-eoh+es | mean +- std |").startswith("| coevo-eoh+es | mean +- std | no finished run |")
    assert line(f"| {packing_rows.SEED} | - |").startswith(f"| {packing_rows.SEED} | - | {13 / 6:.10f} |")


def test_the_findings_page_lists_the_command_of_every_cell() -> None:
    """The page's per-cell commands are the ones the table says run each cell."""
    page = (PEERS_DIR / "FINDINGS.md").read_text()
    listed = {
        line.split("`")[1]
        for line in page.splitlines()
        if "`python experiments/peers/packing_table.py --systems" in line
    }
    expected = {packing_table.cell_command(TASK, s, seed) for s in packing_table.SYSTEMS for seed in range(5)}
    assert listed == expected
