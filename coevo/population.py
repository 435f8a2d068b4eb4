"""The population manager: the heuristics that survive, and the prompt variants that write them.

`Population` is EoH's elitist pool: offspring join, duplicates (the same logic, by `code_fingerprint`,
so a reformatted copy counts as its original) are dropped, and only the best `size` stay. Distinct
logic with tied scores stays: integer objectives (bin counts, set sizes) tie often. Parents are
drawn with EoH's rank weights 1 / (rank + size) unless another `ParentSampling` is given. Islands
and the MAP-Elites archive build on it (`coevo.islands`, `coevo.map_elites`).

`PromptPool` is the prompt side of the coevo method: prompt variants (templates plus skill notes)
with a running score; the worst is replaced by a mutation of the best each generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

import numpy as np

from coevo.candidate import Candidate
from coevo.operators.fingerprint import code_fingerprint
from coevo.operators.records import Parent
from coevo.operators.templates import PromptTemplates
from coevo.parent_sampling import ParentSampling


class Population:
    """At most `size` valid candidates, best (highest fitness) first."""

    def __init__(
        self, size: int, members: Iterable[Candidate] = (), sampling: ParentSampling = ParentSampling()
    ) -> None:
        if size < 1:
            raise ValueError(f"population size must be at least 1, got {size}")
        self.size = size
        self.sampling = sampling
        self.members: list[Candidate] = []
        self.add(members)

    def add(self, candidates: Iterable[Candidate]) -> None:
        """Merge valid candidates in, keeping the best `size` with distinct logic.

        Ties break by arrival (a stable sort): members before newcomers, newcomers in the order given,
        so the same additions always leave the same population and an incumbent is never unseated by
        an equal.
        """
        self.members = distinct_logic(best_first(self.members, candidates))[: self.size]

    def __len__(self) -> int:
        return len(self.members)

    @property
    def best(self) -> Candidate | None:
        return self.members[0] if self.members else None

    @property
    def worst_fitness(self) -> float | None:
        return self.members[-1].fitness if self.members else None

    def select(self, rng: np.random.Generator, count: int) -> list[Candidate]:
        """`count` distinct parents (fewer if the pool is smaller), drawn with the pool's sampling weights."""
        return self.sampling.draw(rng, self.members, count)

    def can_draw(self, count: int) -> bool:
        """Whether `select` can give `count` distinct parents (a crossover needs two)."""
        return len(self.members) >= count

    def state(self) -> dict[str, Any]:
        return {"members": [c.to_dict() for c in self.members]}

    def restore(self, state: dict[str, Any]) -> None:
        self.members = [Candidate.from_dict(c) for c in state["members"]]


def best_first(members: Sequence[Candidate], newcomers: Iterable[Candidate]) -> list[Candidate]:
    """Members and the valid newcomers, best first; ties keep arrival order (members first)."""
    return sorted([*members, *(c for c in newcomers if c.valid)], key=lambda c: c.fitness, reverse=True)


def distinct_logic(pool: Iterable[Candidate]) -> list[Candidate]:
    """`pool` without the candidates whose logic (`code_fingerprint`) an earlier one already has."""
    kept: list[Candidate] = []
    seen: set[str] = set()
    for candidate in pool:
        logic = _fingerprint(candidate.code)
        if logic not in seen:
            seen.add(logic)
            kept.append(candidate)
    return kept


@lru_cache(maxsize=4096)
def _fingerprint(code: str) -> str:
    """`code_fingerprint`, computed once per code: members are re-checked on every `add`."""
    return code_fingerprint(code)


def as_parent(candidate: Candidate) -> Parent:
    """How prompts show a candidate: its key, thought, code and natural-sign search objective."""
    return Parent(candidate.key, candidate.thought, candidate.code, candidate.objective)


@dataclass(frozen=True)
class PromptVariant:
    """One way of asking: the operator templates plus skill notes shown as hints, with its record."""

    id: str
    templates: PromptTemplates
    notes: str = ""
    parent: str | None = None
    changed: str | None = None
    """Which component this variant rewrote from its parent (None for the initial variant)."""
    uses: int = 0
    score: float = 0.0
    """Running mean, across generations, of the rewards of the children written under this variant."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"templates": self.templates.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptVariant:
        return cls(**{**data, "templates": PromptTemplates(data["templates"])})

    def scored(self, rewards: Sequence[float]) -> PromptVariant:
        """This variant with `rewards` folded into its running mean."""
        if not rewards:
            return self
        uses = self.uses + len(rewards)
        return replace(self, uses=uses, score=self.score + (sum(rewards) - len(rewards) * self.score) / uses)


SHRINK_USES = 4
"""Pseudo-uses of the pool's mean in a prompt variant's shrunk score."""


class PromptPool:
    """At most `size` prompt variants; new variants start untried and are assigned first."""

    def __init__(self, size: int, variants: Iterable[PromptVariant]) -> None:
        if size < 1:
            raise ValueError(f"prompt pool size must be at least 1, got {size}")
        self.size = size
        self.variants = list(variants)

    def assign(self, rng: np.random.Generator, count: int) -> list[PromptVariant]:
        """A balanced, shuffled assignment of `count` slots to variants, so every variant gets tried."""
        slots = [self.variants[i % len(self.variants)] for i in range(count)]
        order = rng.permutation(count)
        return [slots[int(i)] for i in order]

    def record(self, rewards_by_variant: dict[str, list[float]]) -> None:
        self.variants = [v.scored(rewards_by_variant.get(v.id, [])) for v in self.variants]

    @property
    def best(self) -> PromptVariant:
        return max(self.variants, key=lambda v: (v.uses > 0, self.shrunk_score(v)))

    def shrunk_score(self, variant: PromptVariant) -> float:
        """`variant`'s running mean pulled towards the pool's mean by `SHRINK_USES` pseudo-uses, so a
        variant tried a few times cannot overtake one measured over many generations on luck alone."""
        tried = [v for v in self.variants if v.uses > 0]
        if not tried:
            return variant.score
        pool_mean = sum(v.score * v.uses for v in tried) / sum(v.uses for v in tried)
        return (variant.uses * variant.score + SHRINK_USES * pool_mean) / (variant.uses + SHRINK_USES)

    def admit(self, variant: PromptVariant) -> PromptVariant | None:
        """Add `variant`; when full, it replaces the worst tried variant (never the best), which is
        returned. A full pool with nothing to evict leaves `variant` out and returns it."""
        if len(self.variants) < self.size:
            self.variants.append(variant)
            return None
        best = self.best
        evictable = [v for v in self.variants if v.uses > 0 and v.id != best.id]
        if not evictable:
            return variant
        worst = min(evictable, key=self.shrunk_score)
        self.variants = [variant if v.id == worst.id else v for v in self.variants]
        return worst
