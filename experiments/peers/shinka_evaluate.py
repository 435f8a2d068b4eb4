"""ShinkaEvolve's evaluation script, scored by coevo's task functions.

ShinkaEvolve runs it once per candidate as `python shinka_evaluate.py --program_path P --results_dir D`
in a fresh process, killed past the job's wall-clock limit, and reads D/metrics.json and
D/correct.json. The task comes from $COEVO_PEER_TASK, set by shinka_peer.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scoring import score_program  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--program_path", required=True)
    parser.add_argument("--results_dir", required=True)
    args = parser.parse_args()
    verdict = score_program(os.environ["COEVO_PEER_TASK"], Path(args.program_path).read_text())
    results = Path(args.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    metrics = {"combined_score": verdict["combined_score"], "public": {"gap_pct": verdict["gap_pct"]}, "private": {}}
    (results / "metrics.json").write_text(json.dumps(metrics))
    (results / "correct.json").write_text(json.dumps({"correct": verdict["valid"], "error": verdict["reason"]}))
