"""The search-overhead benchmark runs end to end on a tiny setting and prints each ratio it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "bench" / "search_overhead.py"


def test_the_overhead_benchmark_prints_per_candidate_times_and_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--candidates", "2", "--rounds", "2"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())
    assert lines["cpu"].endswith("task tsp_construct")
    for side in ("diff", "archive", "embed", "evaluate"):
        assert float(lines[side].split()[0]) > 0
    for ratio in ("diff_over_evaluate", "archive_over_evaluate"):
        assert 0 < float(lines[ratio]) < 1, "an overhead below the evaluation it serves"
    for ratio in ("diff_over_evaluate", "archive_over_evaluate", "embed_over_evaluate"):
        assert float(lines[f"{ratio}_min"]) <= float(lines[ratio]) <= float(lines[f"{ratio}_max"])
