"""The OpenAI chat-completions wire format as `coevo serve` speaks it: request bodies in, reply bodies
and server-sent-event chunks out.

Plain functions (and one chunk writer) over JSON-ready dicts, so the HTTP transport stays thin and the
format is checked on its own. A request may ask for `n` choices: choice 0 samples with the request's own
seed (so `n=1` and the first of `n` choices agree), choice i > 0 with `request_seed(seed, i)`, so every
choice is its own reproducible stream. A streamed reply carries the same choices as chunks (`chat.completion.chunk`,
written by `ChunkWriter`), ends with `data: [DONE]`, and with `stream_options.include_usage` has a
last chunk holding the usage and no choices.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from coevo.llm.base import Completion, Message, SamplingParams
from coevo.llm.seeds import request_seed

MAX_CHOICES = 64
"""Most choices one request may ask for: each is a row of the batch."""
_ROLES = {"system", "user", "assistant"}


class BadRequest(ValueError):
    """The client sent something this server cannot answer; the message is one line."""


@dataclass(frozen=True)
class ChatRequest:
    """A parsed chat completions request."""

    model: str
    messages: list[Message]
    sampling: SamplingParams
    n: int = 1
    stream: bool = False
    include_usage: bool = False

    def choice_samplings(self) -> list[SamplingParams]:
        """One sampling per choice: choice 0 keeps the request's seed, choice i > 0 gets its own."""
        seed = self.sampling.seed
        return [self.sampling] + [replace(self.sampling, seed=request_seed(seed, i)) for i in range(1, self.n)]


def parse_chat_request(body: Any, max_tokens_cap: int | None = None) -> ChatRequest:
    """The request in a chat completions body, or BadRequest saying what is wrong.

    With `max_tokens_cap`, answers get at most that many new tokens, and exactly that many when the
    body names no limit."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    for message in messages:
        if not (
            isinstance(message, dict) and message.get("role") in _ROLES and isinstance(message.get("content"), str)
        ):
            raise BadRequest("each message needs a role (system, user or assistant) and a string content")
    model = body.get("model")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string")
    n = body.get("n")
    n = 1 if n is None else n
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise BadRequest(f"'n' must be a whole number from 1 to {MAX_CHOICES}")
    stream = body.get("stream") or False
    options = body.get("stream_options")
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false")
    if options is not None and not (stream and isinstance(options, dict)):
        raise BadRequest("'stream_options' must be an object, and only with stream=true")
    clean = [{"role": m["role"], "content": m["content"]} for m in messages]
    include_usage = bool((options or {}).get("include_usage", False))
    return ChatRequest(model, clean, _sampling(body, max_tokens_cap), n, stream, include_usage)


def _sampling(body: dict[str, Any], max_tokens_cap: int | None) -> SamplingParams:
    defaults = SamplingParams()
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    try:
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        max_new_tokens = int(asked) if asked is not None else (max_tokens_cap or defaults.max_new_tokens)
        if max_tokens_cap is not None:
            max_new_tokens = min(max_new_tokens, max_tokens_cap)
        sampling = SamplingParams(
            max_new_tokens=max_new_tokens,
            temperature=float(body.get("temperature", defaults.temperature)),
            top_p=float(body.get("top_p", defaults.top_p)),
            seed=None if body.get("seed") is None else int(body["seed"]),
            stop=tuple(str(s) for s in stop),
        )
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad sampling parameter: {exc}") from None
    if sampling.max_new_tokens < 1 or sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
        raise BadRequest("need max_tokens >= 1, temperature >= 0 and 0 < top_p <= 1")
    return sampling


def usage_body(completions: Sequence[Completion]) -> dict[str, int]:
    """The reply's usage: the prompt counted once (every choice shares it), the completions summed."""
    prompt = completions[0].prompt_tokens
    completion = sum(c.completion_tokens for c in completions)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _envelope(model: str, fingerprint: str | None, kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": fingerprint,
    }


def chat_completion_body(completions: Sequence[Completion], model: str) -> dict[str, Any]:
    """The OpenAI response object for a request answered by `completions`, one per choice."""
    choices = [
        {
            "index": index,
            "message": {"role": "assistant", "content": completion.text},
            "logprobs": None,
            "finish_reason": completion.finish_reason,
        }
        for index, completion in enumerate(completions)
    ]
    envelope = _envelope(model, completions[0].weights_id, "chat.completion")
    return {**envelope, "choices": choices, "usage": usage_body(completions)}


class ChunkWriter:
    """The chunks (`chat.completion.chunk`) of one streamed reply, which share its id, time and
    fingerprint. Per choice: an opening chunk with the role, content deltas, a chunk with the finish
    reason. With `include_usage`, every chunk has `usage: null` and a last one the usage and no choices.
    """

    def __init__(self, model: str, fingerprint: str | None, include_usage: bool = False) -> None:
        self.include_usage = include_usage
        self._envelope = _envelope(model, fingerprint, "chat.completion.chunk")
        self._extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def opening(self, index: int) -> dict[str, Any]:
        return self._chunk(index, {"role": "assistant", "content": ""}, None)

    def content(self, index: int, text: str) -> dict[str, Any]:
        return self._chunk(index, {"content": text}, None)

    def finish(self, index: int, reason: str) -> dict[str, Any]:
        return self._chunk(index, {}, reason)

    def usage(self, completions: Sequence[Completion]) -> dict[str, Any]:
        return {**self._envelope, "choices": [], "usage": usage_body(completions)}

    def _chunk(self, index: int, delta: dict[str, str], finish_reason: str | None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._envelope, "choices": [choice], **self._extra}


def sse_event(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: `data: <JSON>` (or the literal `[DONE]`) and a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()
