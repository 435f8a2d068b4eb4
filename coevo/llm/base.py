"""The protocols of the LLM layer: `LLM` (conversations in, completions out) and `WeightsBackend` (an
LLM that builds the `WeightsHost` over its own weights, where an ES engine's decisions touch them).
`WeightsHost` itself lives with the engine, in `coevo.es.protocols`; it is re-exported here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from coevo.es.protocols import WeightsHost
from coevo.llm.seeds import request_seed

__all__ = ["LLM", "Completion", "Message", "SamplingParams", "TextListener", "WeightsBackend", "WeightsHost"]


@runtime_checkable
class WeightsBackend(Protocol):
    """An `LLM` whose weights ES can move: it builds the `WeightsHost` over its own weights."""

    name: str

    def weights_host(self, scope: str, rank: int = 0) -> WeightsHost:
        """A host over this backend's weights: full-rank members (`rank` 0) or rank-`rank` ones batched."""
        ...


# --- The LLM side -------------------------------------------------------------------------------
# Backends take batches of chat conversations and return one completion each, with the token counts
# and timing the budget ledger needs. Which weights produced a completion is part of the answer,
# because every cache and every candidate's provenance is keyed by it.

Message = dict[str, str]
"""One chat message: {"role": "system" | "user" | "assistant", "content": str}."""

TextListener = Callable[[str], None]
"""Receives each new piece of one answer's text as it is decoded, in order, on the decoding thread."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``seed`` makes a request reproducible on backends that support it."""

    max_new_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None
    stop: tuple[str, ...] = ()
    first_request: int = 0
    """Where this call's requests start in the logical batch they belong to. A caller that splits one
    batch into several calls (a full-rank member at a time, low-rank members in chunks) passes each
    chunk's offset, so a request samples the same stream however the batch was split."""
    requests_per_stream: int = 1
    """Consecutive requests of the logical batch that sample one stream: 2 for mirrored ES pairs, whose
    two answers then differ by their weights alone (common random numbers)."""

    def seed_for(self, index: int) -> int | None:
        """The seed of request `index` of a call made with these settings, as every backend uses it."""
        return request_seed(self.seed, (self.first_request + index) // self.requests_per_stream)


AGENT_SAMPLING = SamplingParams(max_new_tokens=64, temperature=0.7, top_p=0.8)
"""Per-turn decoding of agent episodes, as the reference samples them (Agentic ESOpt's released agent code)."""


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
    token_ids: tuple[int, ...] = ()
    """The sampled tokens, end-of-turn token included, where the backend has them (the in-process one),
    so a gradient method trains on exactly what was sampled rather than on a re-tokenised text."""
    model: str | None = None
    """The model of an ensemble that wrote it (`coevo.llm.ensemble`); None where a run has one model."""


@runtime_checkable
class LLM(Protocol):
    """Anything that turns conversations into completions."""

    name: str

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        """One completion per conversation, in order. Backends batch internally as they can."""
        ...
