"""experiments/bench/agents.py --speedup: the figures go into the evidence file beside what it holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "bench"))
from agents import record_speedup  # noqa: E402


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
