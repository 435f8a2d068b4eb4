"""experiments/bench/agents.py --speedup: the figures go into the evidence file beside what it holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "experiments" / "bench"
sys.path.insert(0, str(BENCH))
from agents import BASELINE_REV, REPO, baseline_worktree, record_speedup, speedup_split  # noqa: E402


def test_speedups_merge_into_the_evidence_file_keeping_its_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "evidence" / "results.json"
    results = {"agent_generation": 2.34567, "agent_generation_fp32": 2.0, "cpu_has_native_bf16": False}
    record_speedup(results, path)
    assert json.loads(path.read_text()) == {
        "speedup": {"agent_generation": 2.346, "agent_generation_fp32": 2.0, "cpu_has_native_bf16": False}
    }
    path.write_text(json.dumps({"gridnav": {"base": [0, 1]}, "speedup": {"note": "kept"}}))
    record_speedup({**results, "agent_generation": 3.0}, path)
    evidence = json.loads(path.read_text())
    assert evidence["gridnav"] == {"base": [0, 1]}
    assert evidence["speedup"] == {
        "note": "kept",
        "agent_generation": 3.0,
        "agent_generation_fp32": 2.0,
        "cpu_has_native_bf16": False,
    }
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # no staging file left behind


def test_a_speedup_splits_into_shorter_replies_and_faster_tokens_and_compares_the_moves(tmp_path: Path) -> None:
    """Round by round: baseline tokens over this tree's, and this tree's tokens/s over the baseline's
    (whose product is the seconds' ratio); an episode is the same when every move had the same effect."""
    seed = "gridnav-H2/20260101"
    baseline = [
        {"seconds": 100.0, "tokens": 2000, "moves": [[seed, ["move up, then more text", "move left"]]]},
        {"seconds": 120.0, "tokens": 1800, "moves": [[seed, ["move up"]]]},
    ]
    side = [
        {"seconds": 25.0, "tokens": 1000, "moves": [[seed, ["move up", "Move LEFT"]]]},
        {"seconds": 20.0, "tokens": 900, "moves": [[seed, ["move down"]]]},
    ]
    split = speedup_split("g", baseline, side)
    assert split["g_reply_tokens"] == pytest.approx(2.0) and split["g_reply_tokens_min"] == pytest.approx(2.0)
    assert split["g_per_token"] == pytest.approx((40 / 20 + 45 / 15) / 2)
    assert split["g_same_moves"] == [1, 2] and split["g_differing_moves"] == [f"round 2, episode 1 ({seed})"]
    path = tmp_path / "results.json"
    figures = {"agent_generation": 4.0, "agent_generation_fp32": 2.5, "cpu_has_native_bf16": True}
    record_speedup({**figures, **speedup_split("agent_generation", baseline, side)}, path)
    recorded = json.loads(path.read_text())["speedup"]
    assert recorded["agent_generation_same_moves"] == [1, 2] and recorded["agent_generation_reply_tokens"] == 2.0
    assert "agent_generation_fp32_per_token" not in recorded, "a figure measured without its split records none"


def test_the_baseline_worker_runs_on_the_baseline_revisions_own_agent_workload() -> None:
    """--speedup runs this script on BASELINE_REV's coevo, which kept AgentWorkload in coevo.agents; the
    script must take that tree's class, not this tree's module served by the editable install."""
    present = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{BASELINE_REV}^{{commit}}"], check=False)
    if present.returncode != 0:
        pytest.skip(f"this clone lacks the baseline revision {BASELINE_REV[:10]} (shallow?)")
    with baseline_worktree(BASELINE_REV) as tree:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(BENCH)])}
        probe = "import agents; print(agents.AgentWorkload.__module__, agents.coevo.__file__)"
        answer = subprocess.run([sys.executable, "-c", probe], cwd=tree, env=env, capture_output=True, text=True)
        assert answer.returncode == 0, answer.stderr
        module, package = answer.stdout.split()
        assert module == "coevo.agents" and Path(package).is_relative_to(tree)
