"""The two protocols of the LLM layer: `LLM` (conversations in, completions out) and `WeightsHost`
(where an ES engine's decisions touch weights). Backends implement one or both."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
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


# --- The LLM side -------------------------------------------------------------------------------
# Backends take batches of chat conversations and return one completion each, with the token counts
# and timing the budget ledger needs. Which weights produced a completion is part of the answer,
# because every cache and every candidate's provenance is keyed by it.

Message = dict[str, str]
"""One chat message: {"role": "system" | "user" | "assistant", "content": str}."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``seed`` makes a request reproducible on backends that support it."""

    max_new_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None
    stop: tuple[str, ...] = ()


AGENT_SAMPLING = SamplingParams(max_new_tokens=64, temperature=0.7, top_p=0.8)
"""Per-turn decoding of agent episodes, as the reference samples them (REFERENCES section 7)."""


@dataclass(frozen=True)
class Completion:
    """One generated answer and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str  # "stop" | "length" | "error"
    weights_id: str | None = None
    """Identifies the weights that generated the text (None for remote, prompt-only backends)."""


@runtime_checkable
class LLM(Protocol):
    """Anything that turns conversations into completions."""

    name: str

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        """One completion per conversation, in order. Backends batch internally as they can."""
        ...
