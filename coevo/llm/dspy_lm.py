"""Run DSPy programs on any coevo `LLM`, including an in-process model whose weights ES perturbs (extra `dspy`).

DSPy 3.4 deprecates `BaseLM.forward` subclasses (removed in 3.5) in favour of an engine with
`complete(Request) -> Response` handed to `dspy.LM`, so `CoevoLM` is a `dspy.LM` driven by
`CoevoEngine`. DSPy's response cache knows nothing of weights, so it is off
unless the LM is pinned to one weights version with `at_weights`: the version then becomes part of
the model name, hence of every cache key, and each answer is checked to come from those weights.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from coevo.extras import require
from coevo.llm.base import LLM, Completion, Message, SamplingParams

dspy = require("dspy", "dspy", "coevo.llm.dspy_lm")
lm15 = dspy.lm15

_PROVIDER = "coevo"
_UNSUPPORTED_CONFIG = ("response_format", "tool_choice", "reasoning")
_StreamEvent = lm15.StreamStartEvent | lm15.StreamDeltaEvent | lm15.StreamEndEvent


class WeightsMismatchError(RuntimeError):
    """The backend answered under other weights than the ones the LM (and its cache) is pinned to."""


def _text_of(parts: str | tuple[object, ...] | None, where: str) -> str:
    if parts is None:
        return ""
    if isinstance(parts, str):
        return parts
    if not all(isinstance(part, lm15.TextPart) for part in parts):
        raise lm15.UnsupportedFeatureError(f"coevo backends take text only; {where} has other content")
    return "".join(part.text for part in parts)


def to_conversation(request: lm15.Request) -> list[Message]:
    """The coevo chat messages a DSPy request stands for; refuses what a text-only backend cannot do."""
    if request.tools:
        raise lm15.UnsupportedFeatureError("coevo backends do not call tools")
    conversation: list[Message] = []
    if request.system is not None:
        conversation.append({"role": "system", "content": _text_of(request.system, "the system prompt")})
    for message in request.messages:
        if message.role not in ("user", "assistant"):
            raise lm15.UnsupportedFeatureError(f"coevo backends take user/assistant turns, not {message.role!r}")
        conversation.append({"role": message.role, "content": _text_of(message.parts, f"a {message.role} turn")})
    return conversation


def to_sampling(config: lm15.Config) -> SamplingParams:
    """Map DSPy's generation config onto coevo's; fields DSPy leaves unset keep coevo's defaults."""
    refused = [name for name in _UNSUPPORTED_CONFIG if getattr(config, name) is not None]
    if refused:
        raise lm15.UnsupportedFeatureError(f"coevo backends do not support {', '.join(refused)}")
    given = {
        "max_new_tokens": config.max_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "seed": config.seed,
        "stop": config.stop or None,
    }
    return SamplingParams(**{field: value for field, value in given.items() if value is not None})


class CoevoEngine:
    """A DSPy engine: one canonical request becomes one `LLM.generate` call of batch size one."""

    def __init__(self, llm: LLM, weights_id: str | None = None) -> None:
        self.llm = llm
        self.weights_id = weights_id

    def complete(self, request: lm15.Request) -> lm15.Response:
        (completion,) = self.llm.generate([to_conversation(request)], to_sampling(request.config))
        return self._response(request.model, completion)

    def _response(self, model: str, completion: Completion) -> lm15.Response:
        if self.weights_id is not None and completion.weights_id != self.weights_id:
            raise WeightsMismatchError(
                f"{self.llm.name} answered under weights {completion.weights_id!r}, but this DSPy LM is pinned "
                f"to {self.weights_id!r}: pin it again with at_weights(...) after changing the weights"
            )
        if completion.finish_reason == "error":
            raise lm15.ServerError(f"{self.llm.name} failed to generate: {completion.text}", provider=_PROVIDER)
        return lm15.Response(
            id=None,
            model=model,
            message=lm15.Message.assistant(completion.text),
            finish_reason=completion.finish_reason,
            usage=lm15.Usage(input_tokens=completion.prompt_tokens, output_tokens=completion.completion_tokens),
            provider_data={"weights_id": completion.weights_id, "seconds": completion.seconds},
        )

    def stream(self, request: lm15.Request) -> Iterator[_StreamEvent]:
        return lm15.response_to_events(self.complete(request))

    def close(self) -> None:
        """The engine borrows the backend; whoever created the backend closes it."""


class AsyncCoevoEngine:
    """Async face of `CoevoEngine`: generation runs in a worker thread so the event loop stays free."""

    def __init__(self, engine: CoevoEngine) -> None:
        self.engine = engine

    async def complete(self, request: lm15.Request) -> lm15.Response:
        return await asyncio.to_thread(self.engine.complete, request)

    async def stream(self, request: lm15.Request) -> AsyncIterator[_StreamEvent]:
        for event in lm15.response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release: see `CoevoEngine.close`."""


class CoevoLM(dspy.LM):
    """`dspy.LM` over a coevo backend. Use `dspy.configure(lm=CoevoLM(backend))` or `dspy.context`.

    Unpinned, DSPy's cache is off: the backend's weights may change between any two calls.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        weights_id: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        engine = CoevoEngine(llm, weights_id)
        model = f"{_PROVIDER}/{llm.name}" if weights_id is None else f"{_PROVIDER}/{llm.name}@{weights_id}"
        super().__init__(
            model=model,
            engine=engine,
            async_engine=AsyncCoevoEngine(engine),
            cache=weights_id is not None,
            temperature=temperature,
            max_tokens=max_tokens,
            **kwargs,
        )
        self.llm = llm
        self.weights_id = weights_id

    def at_weights(self, weights_id: str) -> CoevoLM:
        """A copy pinned to one weights version (e.g. `backend.weights_id`), with DSPy's cache keyed by it."""
        return CoevoLM(self.llm, weights_id=weights_id, callbacks=self.callbacks, **self.kwargs)
