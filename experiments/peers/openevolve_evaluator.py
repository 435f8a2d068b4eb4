"""OpenEvolve's evaluator file: `evaluate(program_path) -> metrics`, scored by coevo's task functions.

OpenEvolve imports this module in its worker processes and calls `evaluate` under its own timeout
(an abandoned thread on expiry), so the candidate runs exactly where OpenEvolve runs candidates.
The task comes from $COEVO_PEER_TASK, set by openevolve_peer.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scoring import score_program  # noqa: E402


def evaluate(program_path: str) -> dict[str, float]:
    verdict = score_program(os.environ["COEVO_PEER_TASK"], Path(program_path).read_text())
    return {"combined_score": verdict["combined_score"], "valid": float(verdict["valid"])}
