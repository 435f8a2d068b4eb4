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
from agents import BASELINE_REV, REPO, baseline_worktree, record_speedup  # noqa: E402


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
