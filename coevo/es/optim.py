"""How one ES update moves one parameter tensor: plain SGD (the reference), momentum, Adam, weight decay.

Kept apart from any host so every host (torch module, inference-server worker) moves its weights with
the same arithmetic, and replaying a history reproduces optimizer state bit for bit. The update
ascends the reward: g estimates its gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevo.es.noise import accumulate_, noise_key


class OptimizerConfig(BaseModel):
    """Optimizer on the ES gradient; the default (SGD, no momentum, no decay) is the reference rule."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["sgd", "adam"] = "sgd"
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="SGD heavy-ball momentum")
    beta1: float = Field(0.9, ge=0.0, lt=1.0)
    beta2: float = Field(0.999, ge=0.0, lt=1.0)
    adam_eps: float = Field(1e-8, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0, description="decoupled: theta *= 1 - alpha * weight_decay")

    @property
    def needs_gradient_buffer(self) -> bool:
        """Plain SGD adds the noise straight into the weights; the others need g as a tensor."""
        return self.kind == "adam" or self.momentum > 0.0


class UpdateStep(Protocol):
    """What moving a tensor reads of one ES update (`coevo.es.perturbation.Update`, which carries an
    `OptimizerConfig` and so sits above this module)."""

    seeds: Sequence[int]
    coeffs: Sequence[float]
    alpha: float
    optimizer: OptimizerConfig


@dataclass
class ParamState:
    """Optimizer state of one parameter (absent buffers are allocated on first use)."""

    steps: int = 0
    first_moment: np.ndarray | None = None
    second_moment: np.ndarray | None = None


def apply_update_(param: np.ndarray, name: str, update: UpdateStep, state: ParamState) -> None:
    """Move the fp32 tensor `param` (canonical `name`) by one ES update, in place."""
    config = update.optimizer
    keys = np.array([noise_key(seed, name) for seed in update.seeds], dtype=np.uint64)
    coeffs = np.asarray(update.coeffs, dtype=np.float64)
    state.steps += 1
    if config.weight_decay > 0.0:
        param *= np.float32(1.0 - update.alpha * config.weight_decay)
    if not config.needs_gradient_buffer:
        accumulate_(param, keys, update.alpha * coeffs)  # the reference rule: one pass, no gradient tensor
        return
    grad = np.zeros_like(param)
    accumulate_(grad, keys, coeffs)
    direction_of = _momentum_direction if config.kind == "sgd" else _adam_direction
    param += np.float32(update.alpha) * direction_of(grad, state, config)


def _momentum_direction(grad: np.ndarray, state: ParamState, config: OptimizerConfig) -> np.ndarray:
    """Heavy ball: v = momentum * v + g."""
    if state.first_moment is None:
        state.first_moment = np.zeros_like(grad)
    state.first_moment *= np.float32(config.momentum)
    state.first_moment += grad
    return state.first_moment


def _adam_direction(grad: np.ndarray, state: ParamState, config: OptimizerConfig) -> np.ndarray:
    """Bias-corrected m / (sqrt(v) + eps): every weight moves by about alpha whatever g's scale."""
    if state.first_moment is None or state.second_moment is None:
        state.first_moment = np.zeros_like(grad)
        state.second_moment = np.zeros_like(grad)
    state.first_moment *= np.float32(config.beta1)
    state.first_moment += np.float32(1.0 - config.beta1) * grad
    state.second_moment *= np.float32(config.beta2)
    state.second_moment += np.float32(1.0 - config.beta2) * np.square(grad)
    corrected_first = state.first_moment / np.float32(1.0 - config.beta1**state.steps)
    corrected_second = state.second_moment / np.float32(1.0 - config.beta2**state.steps)
    return corrected_first / (np.sqrt(corrected_second) + np.float32(config.adam_eps))
