"""The messages between the ES engine and a weights host: a few numbers each, never tensors.

As in OpenAI-ES, a member is fully described by its seed (the noise is regenerated from it where the
weights live), so these objects can cross process or machine boundaries and fill the history.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from coevo.es.optim import OptimizerConfig


@dataclass(frozen=True)
class Perturbation:
    """One population member: weights become theta + sign * sigma * eps(seed)."""

    seed: int
    sigma: float
    sign: int = 1

    def __post_init__(self) -> None:
        if self.sign not in (1, -1):
            raise ValueError(f"sign must be +1 or -1, got {self.sign}")
        if not self.sigma >= 0:
            raise ValueError(f"sigma must be >= 0, got {self.sigma}")
        if not 0 <= self.seed < 2**64:
            raise ValueError(f"seed must be in [0, 2**64), got {self.seed}")


@dataclass(frozen=True)
class Update:
    """One ES step: gradient estimate g = sum_j coeffs[j] * eps(seeds[j]), moved by `optimizer` at rate `alpha`.

    With the default optimizer (plain SGD) this is the reference rule theta += alpha * g.
    """

    seeds: tuple[int, ...]
    coeffs: tuple[float, ...]
    alpha: float
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)

    def __post_init__(self) -> None:
        if len(self.seeds) != len(self.coeffs):
            raise ValueError(f"{len(self.seeds)} seeds but {len(self.coeffs)} coefficients")


class PerturbedContext:
    """Mixin for weights hosts: ``with host.perturbed(p):`` runs ``perturb(p)`` and always ``restore()``."""

    def perturb(self, perturbation: Perturbation) -> None:
        raise NotImplementedError

    def restore(self) -> None:
        raise NotImplementedError

    @contextmanager
    def perturbed(self, perturbation: Perturbation) -> Iterator[None]:
        """perturb() on entry, restore() on exit, even on error."""
        self.perturb(perturbation)
        try:
            yield
        finally:
            self.restore()
