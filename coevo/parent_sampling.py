"""How an archive draws parents from its members (best first): the weight each member gets.

`rank` is EoH's 1 / (rank + n), which favours the best without starving the rest; `power-law` is
ShinkaEvolve's (rank + 1) ** -exponent, sharper as the exponent grows; `weighted` follows the score
itself rather than its rank: a sigmoid of each member's distance from the median fitness, in standard
deviations, so a member far ahead of the pack is drawn far more often than its rank alone would say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np

from coevo.candidate import Candidate

Scheme = Literal["rank", "power-law", "weighted"]

Member = TypeVar("Member", bound=Candidate)


@dataclass(frozen=True)
class ParentSampling:
    scheme: Scheme = "rank"
    power_law_exponent: float = 1.0
    weighted_sharpness: float = 10.0

    def weights(self, fitnesses: Sequence[float]) -> np.ndarray:
        """Unnormalised weights of members given best first."""
        n = len(fitnesses)
        if self.scheme == "rank":
            return 1.0 / (np.arange(n) + n)
        if self.scheme == "power-law":
            return (np.arange(n) + 1.0) ** -self.power_law_exponent
        scores = np.asarray(fitnesses, dtype=float)
        spread = scores.std() or 1.0
        distance = np.clip(self.weighted_sharpness * (scores - np.median(scores)) / spread, -500.0, 500.0)
        return 1.0 / (1.0 + np.exp(-distance))

    def draw(self, rng: np.random.Generator, members: Sequence[Member], count: int) -> list[Member]:
        """`count` distinct parents (fewer if there are fewer members) from `members`, best first."""
        if not members:
            raise ValueError("cannot select parents from an empty population")
        weights = self.weights([m.fitness for m in members])
        chosen = rng.choice(len(members), size=min(count, len(members)), replace=False, p=weights / weights.sum())
        return [members[int(i)] for i in chosen]
