"""Held-out selection at the end of a run: the final population on the val split, against the seed.

Selection during the run only ever sees the search split, which can reward heuristics that fit its
instances (TSP construction searches on n = 50 only, while val mixes n = 50, 100 and 200). So the run's
finalists (its `finalists` best distinct heuristics on search) are scored on val and the best there is
the run's answer, as model selection on a validation split goes; the test split stays untouched.
The figures are stored in the run (meta key `validation`) for reports and exports.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from coevo.candidate import Candidate, fitness_of
from coevo.evaluate.evaluator import Evaluator
from coevo.run.runner import Runner
from coevo.run.store import RunStore
from tasks.base import SplitName


def gap_and_objective(figure: dict[str, Any]) -> str:
    """A valid result's figures as every run summary words them."""
    gap = "n/a" if figure["gap_pct"] is None else f"{figure['gap_pct']:.3f}%"
    return f"gap {gap}, objective {figure['objective']:.6g}"


def answer_line(answer: dict[str, Any]) -> str:
    """The run's answer (`RunStore.answer_summary`) on one line, each figure under its split's name."""
    figures = "; ".join(f"on {split}: {gap_and_objective(figure)}" for split, figure in answer["figures"].items())
    return f"best heuristic {answer['key']} (chosen on the {answer['chosen_on']} split): {figures}"


@dataclass(frozen=True)
class Validation:
    split: str
    best: dict[str, Any] | None
    """The selected finalist's result on `split` (EvalResult JSON), None when no finalist is valid."""
    seed: dict[str, Any]
    best_key: str | None = None
    finalists: int = 1

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Validation:
        return cls(**data)

    def lines(self) -> list[str]:
        def figure(result: dict[str, Any] | None) -> str:
            if result is None:
                return "no valid heuristic"
            if not result["valid"]:
                return f"invalid ({result['reason']})"
            return gap_and_objective(result)

        chosen = "best heuristic" if self.finalists == 1 else f"best heuristic (of {self.finalists} finalists)"
        lines = [
            f"{chosen} on {self.split}: {figure(self.best)}",
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


def validate_best(runner: Runner, split: SplitName = "val") -> Validation:
    """Score the run's best distinct heuristics on `split`, keep the best there; store and return it."""
    with runner.evaluator_for(split) as evaluator:
        return validate_stored(runner.store, runner.config.finalists, evaluator)


def validate_stored(store: RunStore, finalists: int, evaluator: Evaluator) -> Validation:
    """`validate_best` on a stored run, without its model: what a script needs to pick the answer of
    runs that stopped before validating (a grid's)."""
    ranked = sorted((c for _, c in store.candidates() if c.valid), key=lambda c: c.fitness, reverse=True)
    distinct: dict[str, Candidate] = {}
    for candidate in ranked:  # one per key, its best-ranked copy
        distinct.setdefault(candidate.key, candidate)
    chosen_from = list(distinct.values())[:finalists]
    codes = [evaluator.task.seed_code(), *(c.code for c in chosen_from)]
    seed, *results = [r.to_json() for r in evaluator.evaluate_many(codes)]
    scored = [(c, r) for c, r in zip(chosen_from, results, strict=True) if r["valid"]]
    chosen = max(scored, key=lambda pair: fitness_of(pair[1]["objective"], evaluator.task.sense), default=None)
    validation = Validation(
        evaluator.split,
        None if chosen is None else chosen[1],
        seed,
        None if chosen is None else chosen[0].key,
        max(len(chosen_from), 1),
    )
    store.set_meta("validation", json.dumps(asdict(validation)))
    return validation
