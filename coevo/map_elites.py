"""A MAP-Elites archive: one elite per cell of a grid over named features of the code.

Each feature's range is cut into `bins` equal bins; a candidate's cell is its tuple of bins, and a cell
keeps only its best candidate (distinct logic, as in `Population`), so the archive holds a spread of
kinds of heuristic rather than the best few of one kind. A feature's range is fixed where given;
otherwise it is the running range of every valid candidate offered so far, so cells are recomputed as
it widens (two elites falling into one cell then keep the better).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from coevo.candidate import Candidate
from coevo.features import FEATURES
from coevo.parent_sampling import ParentSampling
from coevo.population import Population, best_first, distinct_logic

Cell = tuple[int, ...]


class GridArchive(Population):
    """The best candidate of each occupied cell, best first; its size is the number of cells."""

    def __init__(
        self,
        features: Sequence[str],
        bins: int,
        ranges: Mapping[str, tuple[float, float]] | None = None,
        sampling: ParentSampling = ParentSampling(),
    ) -> None:
        unknown = [name for name in features if name not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature {unknown[0]!r}; built-in features: {', '.join(FEATURES)}")
        self.features = tuple(features)
        self.bins = bins
        self.fixed = dict(ranges or {})
        self.running: dict[str, tuple[float, float]] = {}
        """The lowest and highest value seen of each feature without a fixed range."""
        super().__init__(bins ** len(self.features), (), sampling)

    def add(self, candidates: Iterable[Candidate]) -> None:
        newcomers = [c for c in candidates if c.valid]
        for candidate in newcomers:
            for name, value in self._values(candidate).items():
                if name not in self.fixed:
                    low, high = self.running.get(name, (value, value))
                    self.running[name] = (min(low, value), max(high, value))
        cells: dict[Cell, Candidate] = {}
        for candidate in distinct_logic(best_first(self.members, newcomers)):
            cells.setdefault(self.cell(candidate), candidate)
        self.members = list(cells.values())

    def cell(self, candidate: Candidate) -> Cell:
        """The bin of each feature; values outside a fixed range fall in its end bins."""
        bins = []
        for name, value in self._values(candidate).items():
            low, high = self.fixed.get(name) or self.running.get(name, (value, value))
            share = 0.0 if high <= low else (value - low) / (high - low)
            bins.append(min(max(int(share * self.bins), 0), self.bins - 1))
        return tuple(bins)

    def occupancy(self) -> tuple[int, int]:
        """(occupied cells, cells in the grid)."""
        return len(self.members), self.size

    def state(self) -> dict[str, Any]:
        return {**super().state(), "running": self.running}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.running = {name: (low, high) for name, (low, high) in state["running"].items()}

    def _values(self, candidate: Candidate) -> dict[str, float]:
        return {name: FEATURES[name](candidate) for name in self.features}
