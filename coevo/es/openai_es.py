"""OpenAI-ES (Salimans et al. 2017), coevo's default strategy: g = 1/N sum_i z_i sign_i eps_i with the
shaped rewards z (centred ranks or z-scores), each reward first taken less its mirrored pair's mean
when members come in pairs, so whatever a pair shares (text, parent, sampling seed) cancels exactly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from coevo.es.perturbation import Perturbation
from coevo.es.shaping import Shaping
from coevo.es.strategy import Direction, pair_residuals, seed_coefficients


class OpenAIES:
    name = "openai-es"

    class Settings(BaseModel):
        """No knobs of its own: `es.shaping` and `es.antithetic` are shared by every strategy."""

        model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, settings: Settings, shaping: Shaping, antithetic: bool) -> None:
        self.shaping = shaping
        self.antithetic = antithetic

    def direction(self, perturbations: Sequence[Perturbation], rewards: np.ndarray) -> Direction:
        residuals = pair_residuals(perturbations, rewards) if self.antithetic else None
        shaped = self.shaping(rewards if residuals is None else residuals)
        return Direction(seed_coefficients(perturbations, shaped / len(perturbations)), shaped, residuals)
