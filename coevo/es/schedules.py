"""Step-size schedules for sigma and alpha: plain callables step -> value, injected into the engine
(a step may be fractional where the engine follows a run's progress rather than its update count).

Cosine to a floor follows the reference: v_t = v_T + (v_0 - v_T) (1 + cos(pi t / T)) / 2; its Sudoku
ablation found a floor above zero clearly better than decaying to 0. An optional linear warm-up
ramps from v_0 / (W + 1) to v_0 over the first W steps, after which the decay runs over T - W steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Schedule = Callable[[float], float]
ScheduleKind = Literal["constant", "linear", "cosine"]


@dataclass(frozen=True)
class Decay:
    """A schedule from `start` to `end` over `total_steps` (constant, linear or cosine) after a warm-up."""

    kind: ScheduleKind
    start: float
    end: float
    total_steps: int
    warmup_steps: int = 0

    def __call__(self, step: float) -> float:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if step < self.warmup_steps:
            return self.start * (step + 1) / (self.warmup_steps + 1)
        if self.kind == "constant":
            return self.start
        progress = min((step - self.warmup_steps) / max(self.total_steps - self.warmup_steps, 1), 1.0)
        if self.kind == "linear":
            return self.start + (self.end - self.start) * progress
        return self.end + (self.start - self.end) * (1.0 + math.cos(math.pi * progress)) / 2.0


def constant(value: float) -> Schedule:
    """The same value at every step (the reference's WebArena setting)."""
    return Decay("constant", value, value, total_steps=1)


def linear(start: float, end: float, total_steps: int, warmup_steps: int = 0) -> Schedule:
    """Straight line from `start` at the end of warm-up to `end` at `total_steps`, then flat."""
    return Decay("linear", start, end, total_steps, warmup_steps)


def cosine(start: float, end: float, total_steps: int, warmup_steps: int = 0) -> Schedule:
    """Half cosine from `start` to the floor `end` at `total_steps`, then flat."""
    return Decay("cosine", start, end, total_steps, warmup_steps)


class ScheduleConfig(BaseModel):
    """Validated description of a schedule; a bare number in a config means a constant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: float = Field(gt=0.0)
    end: float | None = Field(None, ge=0.0, description="final value; defaults to start")
    kind: ScheduleKind = "constant"
    warmup_steps: int = Field(0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _from_number(cls, value: object) -> object:
        return {"start": value} if isinstance(value, int | float) else value

    def build(self, total_steps: int | None) -> Schedule:
        """The schedule over a run of `total_steps` updates (needed unless constant without warm-up)."""
        if self.kind == "constant" and self.warmup_steps == 0:
            return constant(self.start)
        if total_steps is None or total_steps <= self.warmup_steps:
            raise ValueError(
                f"a {self.kind} schedule with {self.warmup_steps} warm-up steps needs total_steps > warm-up, "
                f"got {total_steps}"
            )
        end = self.start if self.end is None else self.end
        return Decay(self.kind, self.start, end, total_steps, self.warmup_steps)
