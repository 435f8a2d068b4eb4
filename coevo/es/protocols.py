"""The two protocols the ES engine drives: `WeightsHost` (where weights live) and `History` (where
updates are kept). They live with the engine so `coevo.es` depends on nothing above it; backends and
run stores implement them."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from coevo.es.perturbation import Perturbation, Update

if TYPE_CHECKING:
    from coevo.es.history import UpdateRecord


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


class History(Protocol):
    """Where the engine keeps its updates: a JSONL file (`ESHistory`) or a run store's table."""

    def append(self, record: UpdateRecord) -> None:
        """Keep one record; records arrive in step order, 0, 1, ..."""
        ...

    def load(self) -> list[UpdateRecord]:
        """Every record kept so far, in step order."""
        ...
