"""A prompt-only `LLM` for any server that speaks the OpenAI chat completions API.

vLLM, SGLang, llama.cpp's server, Ollama, hosted APIs and `coevo serve` all qualify. Such a server
owns its weights, so this backend cannot be perturbed (`supports_weights = False`) and reports
`weights_id=None`. Transient faults (timeouts, dropped connections, 429, 5xx, unreadable bodies) are
retried with exponential backoff; mistakes that retrying cannot fix (bad key, unknown model, a
rejected request) fail at once. Every failure is one line naming the server and what went wrong.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

import httpx

from coevo.llm.base import Completion, Message, SamplingParams

_TRANSIENT_STATUS = {408, 409, 429, 500, 502, 503, 504}


class LLMServerError(RuntimeError):
    """A request to the server failed for good; the message is one line."""


class _Transient(Exception):
    """A failure worth retrying; carries the one-line reason for the final error."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class OpenAICompatLLM:
    """Chat completions over HTTP, `concurrency` requests in flight at once (the server batches them)."""

    supports_weights = False

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        concurrency: int = 8,
    ) -> None:
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("concurrency must be >= 1, max_retries >= 0 and timeout_s > 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.concurrency = concurrency
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        """One completion per conversation, in order; request i carries seed `sampling.seed_for(i)`."""
        payloads = [
            self._payload(messages, sampling, sampling.seed_for(i)) for i, messages in enumerate(requests)
        ]
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="coevo-openai") as pool:
            futures = [pool.submit(self._complete, payload) for payload in payloads]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()  # requests not yet sent are dropped; in-flight ones end by timeout
                raise

    def list_models(self) -> list[str]:
        """Model ids the server offers (GET /v1/models)."""
        return [entry["id"] for entry in self._request_json("GET", "/models", None)["data"]]

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _payload(self, messages: Sequence[Message], sampling: SamplingParams, seed: int | None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        if seed is not None:
            payload["seed"] = seed
        if sampling.stop:
            payload["stop"] = list(sampling.stop)
        return payload

    def _complete(self, payload: dict[str, Any]) -> Completion:
        started = time.perf_counter()
        body = self._request_json("POST", "/chat/completions", payload)
        try:
            choice = body["choices"][0]
            text = choice["message"]["content"] or ""
            usage = body.get("usage") or {}
            finish_reason = "length" if choice.get("finish_reason") == "length" else "stop"
            return Completion(
                text=text,
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                seconds=time.perf_counter() - started,
                finish_reason=finish_reason,
                weights_id=None,
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LLMServerError(
                f"{self.base_url}: reply is not a chat completion ({type(exc).__name__}: {exc})"
            ) from None

    def _request_json(self, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        """Send with retries on transient faults; returns the decoded JSON object."""
        attempt = 0
        while True:
            try:
                return self._attempt(method, path, payload)
            except _Transient as fault:
                if attempt == self.max_retries:
                    raise LLMServerError(
                        f"{self.base_url}{path}: {fault} (gave up after {attempt + 1} attempts)"
                    ) from None
                time.sleep(self._delay(attempt, fault.retry_after))
                attempt += 1

    def _attempt(self, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        try:
            response = self._client.request(method, path, json=payload)
        except httpx.TimeoutException:
            raise _Transient(f"no reply within {self._client.timeout.read:g} s") from None
        except httpx.TransportError as exc:
            raise _Transient(f"connection failed ({type(exc).__name__}: {exc or 'no detail'})") from None
        status = response.status_code
        if status in (401, 403):
            raise LLMServerError(f"{self.base_url}: authentication failed (HTTP {status}); check the API key")
        if status == 404:
            raise LLMServerError(
                f"{self.base_url}{path}: not found (HTTP 404): model {self.model!r} or the endpoint is unknown "
                f"to this server ({_error_detail(response)})"
            )
        if status in _TRANSIENT_STATUS:
            raise _Transient(f"HTTP {status} ({_error_detail(response)})", _retry_after(response))
        if status >= 400:
            raise LLMServerError(f"{self.base_url}{path}: request rejected (HTTP {status}: {_error_detail(response)})")
        try:
            body = response.json()
        except ValueError:
            raise _Transient(f"malformed JSON in the reply ({response.text[:60]!r})") from None
        if not isinstance(body, dict):
            raise _Transient(f"reply is JSON but not an object ({response.text[:60]!r})")
        return body

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter, or the server's Retry-After; never above max_backoff_s."""
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        return min(self.backoff_s * 2**attempt, self.max_backoff_s) * random.uniform(0.5, 1.0)


def _error_detail(response: httpx.Response) -> str:
    """The server's error message on one line, whether it sent OpenAI-style JSON or plain text."""
    try:
        detail = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = response.text
    return " ".join(str(detail).split())[:200] or "no detail"


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None
