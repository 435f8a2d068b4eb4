"""Held-out check of a finished run: the best heuristic and the task's seed on the val split.

Selection only ever sees the search split, so the val figures are the honest measure of whether a run
beat its seed; they are stored in the run (meta key `validation`) for reports and exports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from coevo.evaluate.evaluator import Evaluator
from coevo.run.runner import Runner


@dataclass(frozen=True)
class Validation:
    split: str
    best: dict[str, Any] | None
    seed: dict[str, Any]

    def lines(self) -> list[str]:
        def figure(result: dict[str, Any] | None) -> str:
            if result is None:
                return "no valid heuristic"
            if not result["valid"]:
                return f"invalid ({result['reason']})"
            gap = "n/a" if result["gap_pct"] is None else f"{result['gap_pct']:.3f}%"
            return f"gap {gap}, objective {result['objective']:.6g}"

        lines = [
            f"best heuristic on {self.split}: {figure(self.best)}",
            f"seed heuristic on {self.split}: {figure(self.seed)}",
        ]
        if self.best and self.best["valid"] and self.seed["valid"] and self.best["gap_pct"] is not None:
            delta = self.seed["gap_pct"] - self.best["gap_pct"]
            if delta > 0:
                lines.append(f"the best heuristic beats the seed by {delta:.3f} percentage points of gap")
            elif delta == 0:
                lines.append("the best heuristic scores as the seed does: nothing better was found")
            else:
                lines.append(
                    f"the best heuristic is {-delta:.3f} percentage points worse than the seed on {self.split}"
                )
        return lines


def validate_best(runner: Runner, split: str = "val") -> Validation:
    """Evaluate the run's best heuristic and the seed on `split`; store and return the figures."""
    best = runner.best
    codes = [runner.task.seed_code()] + ([best.code] if best is not None else [])
    with Evaluator(runner.task, split, cache_dir=runner.run_dir / "eval-cache") as evaluator:
        results = [r.to_json() for r in evaluator.evaluate_many(codes)]
    validation = Validation(split, results[1] if best is not None else None, results[0])
    runner.store.set_meta(
        "validation",
        json.dumps(
            {
                "split": split,
                "best_key": None if best is None else best.key,
                "best": validation.best,
                "seed": validation.seed,
            }
        ),
    )
    return validation
