"""The protocol of where weights live (`WeightsHost`), which the ES engine drives. It lives with the
engine so `coevo.es` depends on nothing above it; backends implement it. Where updates are kept is
`coevo.es.update_log.History`."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from coevo.es.perturbation import Perturbation, Update


@runtime_checkable
class WeightsHost(Protocol):
    """Owns a model's weights and applies seed-described perturbations and updates where they live.

    The ES engine never sees tensors: it sends `Perturbation`s and `Update`s (seeds and numbers), so a
    host may be an in-process torch module, an inference-server worker or a batched low-rank population.
    Contract: perturb() and apply_update() require the unperturbed state; restore() returns to it.
    """

    scope: str
    """Which parameters evolve (e.g. "full", "all_linear", a name regex); recorded in the history."""
    noise_version: str
    """Identifies how seeds become directions; a history replays only on a host with the same one."""

    def perturb(self, perturbation: Perturbation) -> None:
        """Set the weights to theta + sign * sigma * eps(seed)."""
        ...

    def restore(self) -> None:
        """Return to theta after perturb()."""
        ...

    def perturbed(self, perturbation: Perturbation) -> AbstractContextManager[None]:
        """perturb() on entry, restore() on exit, even on error."""
        ...

    def apply_update(self, update: Update) -> None:
        """Move theta by one ES step (fp32 arithmetic, optimizer state kept by the host)."""
        ...

    def weights_sha256(self) -> str:
        """Hash of the live weights (names, dtypes, shapes, bytes): equal hashes mean equal models."""
        ...
