"""The rule that turns a population's rewards into an ES step, chosen by name (`es.strategy`).

The engine asks, evaluates and records; a strategy only says, from the members and their rewards
(invalid ones already penalised), which direction to step in: one coefficient per seed, so the
update stays a few numbers that replay exactly whatever strategy made it. Strategies are plugins in
the entry-point group ``coevo.es_strategies`` (coevo's own included) or ``file.py:Class`` /
``module:Class`` specs. A strategy class declares

  * ``name``: what configs call it;
  * ``Settings``: a pydantic model of its own knobs (`es.strategy_options` is validated against it);
  * ``__init__(settings, shaping, antithetic)``: `shaping` is `es.shaping`'s function, `antithetic`
    whether the members come in mirrored pairs;
  * ``direction(perturbations, rewards) -> Direction | None`` (None: no direction this step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ValidationError

from coevo.es.perturbation import Perturbation
from coevo.es.shaping import Shaping
from coevo.plugins import PluginError, Registry

STRATEGIES = Registry(
    "coevo.es_strategies",
    "ES strategy",
    lambda cls: (
        None
        if callable(getattr(cls, "direction", None)) and isinstance(getattr(cls, "Settings", None), type)
        else "it needs a Settings model and direction()"
    ),
)


@dataclass(frozen=True)
class Direction:
    """One step's direction: g = sum over seeds of coeffs[seed] * eps(seed), and what the history keeps."""

    coeffs: dict[int, float]
    shaped: np.ndarray
    """Per member, the weight the strategy gave its reward (the history's shaped rewards)."""
    residuals: np.ndarray | None = None
    """Per member, its reward less its mirrored pair's mean, where the strategy centres pairs."""


class Strategy(Protocol):
    name: str

    def direction(self, perturbations: Sequence[Perturbation], rewards: np.ndarray) -> Direction | None: ...


strategy_class = STRATEGIES.get


def strategy_settings(name: str, options: Mapping[str, Any]) -> BaseModel:
    """`options` validated against strategy `name`'s own Settings; ValueError (one line) otherwise."""
    cls = strategy_class(name)
    try:
        return cls.Settings.model_validate(dict(options))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
        raise PluginError(f"es.strategy_options for {name!r}: {problems}") from None


def build_strategy(name: str, options: Mapping[str, Any], shaping: Shaping, antithetic: bool) -> Strategy:
    """Strategy `name` with its validated options."""
    return strategy_class(name)(strategy_settings(name, options), shaping, antithetic)


def seed_coefficients(perturbations: Sequence[Perturbation], weights: np.ndarray) -> dict[int, float]:
    """Per seed, the sum of its members' weights times their signs: a mirrored pair becomes one seed."""
    coeffs: dict[int, float] = {}
    for p, w in zip(perturbations, weights, strict=True):
        coeffs[p.seed] = coeffs.get(p.seed, 0.0) + float(w) * p.sign
    return coeffs


def pair_residuals(perturbations: Sequence[Perturbation], rewards: np.ndarray) -> np.ndarray:
    """Each reward less the mean of its mirrored pair (members sharing a seed, signs +1 and -1). A member
    whose mirror was never scored (the budget ran out between them) has nothing to contrast: 0."""
    by_seed: dict[int, list[int]] = {}
    for index, p in enumerate(perturbations):
        by_seed.setdefault(p.seed, []).append(index)
    residuals = np.array(rewards, dtype=np.float64)
    for seed, indices in by_seed.items():
        if len(indices) > 1 and sorted(perturbations[i].sign for i in indices) != [-1, 1]:
            raise ValueError(f"seed {seed} is not one mirrored pair (+1, -1) in this population")
        residuals[indices] -= residuals[indices].mean()
    return residuals
