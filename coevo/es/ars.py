"""Augmented Random Search (Mania et al. 2018, ARS V1-t): mirrored pairs only; keep the pairs whose
better member scored highest, and step along each kept pair's reward difference divided by the
standard deviation of the kept rewards, g = 1 / (b sigma_R) sum_k (r+_k - r-_k) eps_k. The scale
adapts to the spread of what the step is made of, so no shaping is applied."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevo.es.perturbation import Perturbation
from coevo.es.shaping import FLAT_STD, Shaping
from coevo.es.strategy import Direction, seed_coefficients


class ARS:
    name = "ars"

    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        top_share: float = Field(0.5, gt=0, le=1, description="share of the pairs kept (b / pairs), at least one")

    def __init__(self, settings: Settings, shaping: Shaping, antithetic: bool) -> None:
        if not antithetic:
            raise ValueError("ES strategy 'ars' steps along mirrored pairs: set es.antithetic = true")
        self.top_share = settings.top_share

    def direction(self, perturbations: Sequence[Perturbation], rewards: np.ndarray) -> Direction | None:
        """None when the kept rewards do not differ (no direction to scale)."""
        pairs: dict[int, dict[int, int]] = {}
        for index, p in enumerate(perturbations):
            pairs.setdefault(p.seed, {})[p.sign] = index
        complete = [members for members in pairs.values() if len(members) == 2]
        if not complete:
            return None
        kept_count = max(1, round(self.top_share * len(complete)))
        best_first = sorted(complete, key=lambda m: -max(rewards[m[1]], rewards[m[-1]]))
        kept = best_first[:kept_count]
        spread = float(np.std([rewards[m[s]] for m in kept for s in (1, -1)]))
        if spread <= FLAT_STD:
            return None
        weights = np.zeros(len(perturbations))
        for members in kept:
            half_difference = (rewards[members[1]] - rewards[members[-1]]) / 2
            weights[members[1]] = half_difference / (kept_count * spread)
            weights[members[-1]] = -half_difference / (kept_count * spread)
        kept_members = [index for members in kept for index in members.values()]
        coeffs = seed_coefficients([perturbations[i] for i in kept_members], weights[kept_members])
        return Direction(coeffs, weights)
