"""`Candidate`: one heuristic with where it came from (operator, parents, prompt, weights) and its score.

Provenance is part of the record because a run must answer "which prompt and which weights wrote
this?" and because every cache downstream is keyed by it. Inside the loop one sign holds: `fitness`
is higher-is-better whatever the task's natural sense, so selection, rewards and ES never need to know
the task; `objective` keeps the natural sign for reports and prompts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from coevo.es.perturbation import Perturbation
from coevo.pyast import source_sha256

Sense = Literal["min", "max"]


def code_key(code: str) -> str:
    """Content hash of code: a candidate's identity in the store and in prompts (`Candidate.key`)."""
    return source_sha256(code)[:16]


def fitness_of(objective: float, sense: Sense) -> float:
    """The loop's score of a natural-sign objective: higher is better on every task."""
    return objective if sense == "max" else -objective


@dataclass(frozen=True)
class WeightsRef:
    """The weights a candidate was written under: the base model after `step` ES updates, plus an
    optional perturbation (seed, sign, sigma). `coevo.es.update_log.replay` rebuilds them exactly."""

    base: str
    step: int
    seed: int | None = None
    sign: int = 1
    sigma: float = 0.0

    @classmethod
    def of(cls, base: str, step: int, perturbation: Perturbation | None) -> WeightsRef:
        if perturbation is None:
            return cls(base, step)
        return cls(base, step, perturbation.seed, perturbation.sign, perturbation.sigma)

    def label(self) -> str:
        """Short text for tables: `model@step` or `model@step+seed`."""
        tail = "" if self.seed is None else f"{'+' if self.sign > 0 else '-'}{self.seed:x}"[:9]
        return f"{self.base}@{self.step}{tail}"


@dataclass(frozen=True)
class Candidate:
    """A heuristic, its lineage and its verdict on the search split."""

    code: str
    thought: str
    operator: str
    """EoH operator (i1 e1 e2 m1 m2) or `library` for heuristics loaded from `heuristics/`."""
    generation: int
    parents: tuple[str, ...] = ()
    """Keys of the parents shown in the prompt."""
    prompt_id: str | None = None
    """The prompt variant used (coevo method), None for the default templates."""
    weights: WeightsRef | None = None
    """None for library heuristics and prompt-only backends."""
    fitness: float | None = None
    """Mean objective on the search split as a higher-is-better score (`fitness_of`); None when invalid."""
    objective: float | None = None
    """The same mean in the task's natural sign, as users read it."""
    gap_pct: float | None = None
    reason: str | None = None
    """Why the candidate is invalid (parse failure or evaluator verdict); None when valid."""

    @property
    def key(self) -> str:
        """Content hash of the code: the candidate's identity in the store and in prompts."""
        return code_key(self.code)

    @property
    def valid(self) -> bool:
        return self.fitness is not None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        fields = {k: v for k, v in data.items() if k != "key"}
        fields["parents"] = tuple(fields["parents"])
        if fields["weights"] is not None:
            fields["weights"] = WeightsRef(**fields["weights"])
        return cls(**fields)
