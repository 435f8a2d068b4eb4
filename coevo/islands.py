"""The run's population: one or more islands, each an elitist pool or a MAP-Elites archive.

Islands evolve apart and meet only at migrations, so each can settle on its own kind of heuristic:
- a parent draw (`select`) takes every parent from one island, the islands taking turns;
- a child joins the island its parents were drawn from, so it joins an island that holds them all (a
  child whose parents were not drawn here, such as hill climbing's, joins its first parent's island);
  a child without parents (i1, the library) joins the islands in turn, so none is left to fill from
  the others;
- every `migration_interval` generations each island sends copies of its best `migration_rate` share
  (at least one) to the next island in the ring.
One island with the elitist pool and rank weights is EoH's population, draw for draw.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from coevo.candidate import Candidate
from coevo.map_elites import GridArchive
from coevo.parent_sampling import ParentSampling
from coevo.population import Population

ArchiveKind = Literal["elite", "map-elites"]


@dataclass(frozen=True)
class PopulationStructure:
    """How the population is laid out (the `[population]` settings, docs/runs.md#population-structure)."""

    islands: int = 1
    migration_interval: int = 5
    migration_rate: float = 0.1
    archive: ArchiveKind = "elite"
    features: tuple[str, ...] = ("code_length",)
    feature_bins: int = 10
    feature_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    sampling: ParentSampling = ParentSampling()


class IslandPopulation:
    """Islands of at most ceil(size / islands) members each (an elite pool) or one elite per cell."""

    def __init__(self, size: int, structure: PopulationStructure = PopulationStructure()) -> None:
        self.structure = structure
        self.islands: list[Population] = [self._archive(size) for _ in range(structure.islands)]
        self.turn = 0
        """The island the next parent draw starts its search from."""
        self.arrivals = 0
        """Parentless children placed so far: the next one joins island `arrivals % islands`."""
        self.drawn: list[tuple[tuple[str, ...], int]] = []
        """(parent keys, island) of each draw since the last `add`, which places the children of each."""

    def _archive(self, size: int) -> Population:
        structure = self.structure
        if structure.archive == "map-elites":
            return GridArchive(structure.features, structure.feature_bins, structure.feature_ranges, structure.sampling)
        return Population(math.ceil(size / structure.islands), sampling=structure.sampling)

    # --- what methods use (the same as `Population`'s) -------------------------------------------------
    @property
    def members(self) -> list[Candidate]:
        """Every island's members, best first, a migrant's copies counted once."""
        pool = sorted((c for island in self.islands for c in island.members), key=lambda c: c.fitness, reverse=True)
        unique: dict[str, Candidate] = {}
        for candidate in pool:
            unique.setdefault(candidate.key, candidate)
        return list(unique.values())

    def __len__(self) -> int:
        return len(self.members)

    @property
    def best(self) -> Candidate | None:
        return max(
            (island.best for island in self.islands if island.best is not None), key=lambda c: c.fitness, default=None
        )

    @property
    def worst_fitness(self) -> float | None:
        return min((island.worst_fitness for island in self.islands if island.members), default=None)

    def can_draw(self, count: int) -> bool:
        return any(island.can_draw(count) for island in self.islands)

    def select(self, rng: np.random.Generator, count: int) -> list[Candidate]:
        """`count` parents from one island: the first from `turn` on that holds as many, else the largest."""
        ring = [(self.turn + step) % len(self.islands) for step in range(len(self.islands))]
        able = [i for i in ring if self.islands[i].can_draw(count)]
        chosen = able[0] if able else max(ring, key=lambda i: len(self.islands[i]))
        self.turn = (self.turn + 1) % len(self.islands)
        parents = self.islands[chosen].select(rng, count)
        self.drawn.append((tuple(p.key for p in parents), chosen))
        return parents

    def add(self, candidates: Iterable[Candidate]) -> None:
        """Place each candidate on its island (valid or not, so draws and turns stay matched), then merge."""
        candidates = list(candidates)
        arriving: list[list[Candidate]] = [[] for _ in self.islands]
        for candidate, island in zip(candidates, self.placements(candidates), strict=True):
            arriving[island].append(candidate)
        self.drawn = []
        for island, newcomers in zip(self.islands, arriving, strict=True):
            if newcomers:
                island.add(newcomers)

    def placements(self, candidates: Sequence[Candidate]) -> list[int]:
        """The island each of `candidates` joins.

        Children come in the order of the draws they were written from, a draw's children together (a
        mirrored ES pair shares one draw). Where one set of parents was drawn several times (a migrant
        drawn on two islands), its children are shared out over those draws in order, in equal blocks.
        """
        draws: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for keys, island in self.drawn:
            draws[keys].append(island)
        children = Counter(c.parents for c in candidates if c.parents in draws)
        placed: Counter[tuple[str, ...]] = Counter()
        islands = []
        for candidate in candidates:
            if candidate.parents in draws:
                drawn_from = draws[candidate.parents]
                islands.append(drawn_from[placed[candidate.parents] * len(drawn_from) // children[candidate.parents]])
                placed[candidate.parents] += 1
            else:
                islands.append(self._home(candidate))
        return islands

    def _home(self, candidate: Candidate) -> int:
        """The island of a candidate not written from a draw: its first parent's, else the next in turn."""
        if candidate.parents:
            for index, island in enumerate(self.islands):
                if any(member.key == candidate.parents[0] for member in island.members):
                    return index
        island = self.arrivals % len(self.islands)
        self.arrivals += 1
        return island

    # --- what the runner uses ----------------------------------------------------------------------
    def end_generation(self, generation: int) -> bool:
        """Migrate around the ring if `generation` (finished, counted from 1) is due; True if it was."""
        structure = self.structure
        if structure.islands == 1 or generation < 1 or generation % structure.migration_interval:
            return False
        emigrants = [island.members[: max(1, int(structure.migration_rate * len(island)))] for island in self.islands]
        for index, leaving in enumerate(emigrants):
            self.islands[(index + 1) % len(self.islands)].add(leaving)
        return True

    def state(self) -> dict[str, Any]:
        return {
            "islands": [island.state() for island in self.islands],
            "turn": self.turn,
            "arrivals": self.arrivals,
            "drawn": [[list(keys), island] for keys, island in self.drawn],
        }

    def restore(self, state: dict[str, Any]) -> None:
        for island, saved in zip(self.islands, state["islands"], strict=True):
            island.restore(saved)
        self.turn, self.arrivals = state["turn"], state["arrivals"]
        self.drawn = [(tuple(keys), island) for keys, island in state["drawn"]]
