"""`coevo serve`: the in-process model behind an OpenAI-compatible HTTP API.

Other tools (DSPy, agents, `OpenAICompatLLM`) can then use the embedded model, or an evolved one: the
weights of a run's ES history at step K. Only `/v1/models` and non-streaming `/v1/chat/completions`
(n=1) are offered, plus `/v1/ledger` (coevo's own): the calls and tokens served so far, so frameworks that
count their budgets differently can be compared by what they asked of the model. `max_tokens_cap` bounds
every answer, whatever the client asks or omits (some clients send no max_tokens). Concurrent requests are pooled for a few milliseconds and generated as one batch,
because on CPU a batch of 8 costs little more than a single request; each request keeps its own seed,
so batching never changes what a seeded request returns. `system_fingerprint` carries the weights id.
With a transcript file, every answered request is appended to it as one JSON line (messages, answer,
finish reason, tokens): what a client's parser was given, when a framework reports only what it parsed.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from coevo.llm.base import Completion, Message, SamplingParams
from coevo.llm.embedded import DEFAULT_MODEL, ModelNotFoundError
from coevo.operators.ledger import BudgetLedger

if TYPE_CHECKING:  # torch is heavy: imported only when a model is actually served
    from coevo.llm.hf import HFBackend

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 << 20
LOOPBACK = "127.0.0.1"
_ROLES = {"system", "user", "assistant"}


class BadRequest(ValueError):
    """The client sent something this server cannot answer; the message is one line."""


@dataclass
class _Pending:
    messages: Sequence[Message]
    sampling: SamplingParams
    result: Future[Completion]


class DynamicBatcher:
    """Pools concurrent requests into one `generate_each` call.

    After the first request, it keeps collecting while requests keep coming (each within `gap_s` of
    the previous one), for at most `max_wait_s` and `max_batch` requests: clients that fire together
    are rarely more than a few ms apart, but on a busy machine a fixed short window splits them.
    Exactly one thread runs `run()` and owns the model, so generation never runs concurrently with
    itself. `coevo serve` runs it on the main thread, where the same batches measured 2-20% faster
    than in a spawned thread here; `start()` spawns one instead, for embedding the server elsewhere.
    """

    def __init__(self, backend: HFBackend, gap_s: float = 0.05, max_wait_s: float = 0.5, max_batch: int = 16) -> None:
        self.backend = backend
        self.gap_s = gap_s
        self.max_wait_s = max_wait_s
        self.max_batch = max_batch
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._worker: threading.Thread | None = None

    def submit(self, messages: Sequence[Message], sampling: SamplingParams) -> Future[Completion]:
        """Queue one request; its future resolves when its batch is done."""
        pending = _Pending(messages, sampling, Future())
        self._queue.put(pending)
        return pending.result

    def start(self) -> None:
        """Run the batches in a daemon thread."""
        self._worker = threading.Thread(target=self.run, name="coevo-batcher", daemon=True)
        self._worker.start()

    def close(self) -> None:
        """Let run() finish the batch in progress and return."""
        self._queue.put(None)
        if self._worker is not None:
            self._worker.join()

    def run(self) -> None:
        """Generate batches until close()."""
        while (first := self._queue.get()) is not None:
            batch, closing = self._collect(first)
            log.debug("generating a batch of %d", len(batch))
            try:
                completions = self.backend.generate_each([(p.messages, p.sampling) for p in batch])
            except Exception as exc:  # one bad batch must not kill the server: every waiter gets the error
                log.exception("generation failed")
                for pending in batch:
                    pending.result.set_exception(exc)
            else:
                for pending, completion in zip(batch, completions, strict=True):
                    pending.result.set_result(completion)
            if closing:
                return

    def _collect(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """The first request plus those that follow it closely; True if close() was seen."""
        batch = [first]
        give_up = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_batch:
            wait = min(self.gap_s, give_up - time.monotonic())
            try:
                pending = self._queue.get(timeout=max(0.0, wait))
            except queue.Empty:
                break
            if pending is None:
                return batch, True
            batch.append(pending)
        return batch, False


def parse_chat_request(body: Any, max_tokens_cap: int | None = None) -> tuple[str, list[Message], SamplingParams]:
    """(model, messages, sampling) from a chat completions request body, or BadRequest saying why.

    With `max_tokens_cap`, answers get at most that many new tokens, and exactly that many when the
    body names no limit."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("streaming is not supported; send stream=false")
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported; send several requests instead")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    for message in messages:
        if not (
            isinstance(message, dict) and message.get("role") in _ROLES and isinstance(message.get("content"), str)
        ):
            raise BadRequest("each message needs a role (system, user or assistant) and a string content")
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
    model = body.get("model")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string")
    clean = [{"role": m["role"], "content": m["content"]} for m in messages]
    return model, clean, sampling


def chat_completion_body(completion: Completion, model: str) -> dict[str, Any]:
    """The OpenAI response object for one completion."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": completion.weights_id,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": completion.text},
                "finish_reason": completion.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        },
    }


class ChatServer(ThreadingHTTPServer):
    """One thread per connection; all generation goes through the shared `DynamicBatcher`, whose
    `run()` someone must call (see `make_server` and `serve`)."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        backend: HFBackend,
        model_id: str,
        api_key: str | None,
        max_tokens_cap: int | None = None,
        transcript: Path | None = None,
    ) -> None:
        super().__init__(address, _ChatHandler)
        self.model_id = model_id
        self.api_key = api_key
        self.max_tokens_cap = max_tokens_cap
        self.ledger = BudgetLedger()
        self.transcript = transcript
        self._transcript_lock = threading.Lock()
        self.batcher = DynamicBatcher(backend, max_batch=backend.max_batch_size)

    @property
    def url(self) -> str:
        """Base URL of the API, e.g. http://127.0.0.1:8000/v1."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()

    def log_exchange(self, messages: Sequence[Message], completion: Completion) -> None:
        """Append one answered request to the transcript, if there is one."""
        if self.transcript is None:
            return
        line = {
            "time": time.time(),
            "messages": list(messages),
            "answer": completion.text,
            "finish_reason": completion.finish_reason,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
        }
        with self._transcript_lock, self.transcript.open("a") as out:
            out.write(json.dumps(line) + "\n")


class _ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    server: ChatServer

    def do_GET(self) -> None:
        if not self._authorized():
            return
        route = self.path.rstrip("/")
        if route == "/v1/ledger":
            self._send(HTTPStatus.OK, asdict(self.server.ledger.usage()))
            return
        if route != "/v1/models":
            self._error(HTTPStatus.NOT_FOUND, f"no route GET {self.path}")
            return
        entry = {"id": self.server.model_id, "object": "model", "created": 0, "owned_by": "coevo"}
        self._send(HTTPStatus.OK, {"object": "list", "data": [entry]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes")
            self.close_connection = True
            return
        raw = self.rfile.read(length)
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(HTTPStatus.NOT_FOUND, f"no route POST {self.path}")
            return
        try:
            model, messages, sampling = parse_chat_request(json.loads(raw), self.server.max_tokens_cap)
        except (BadRequest, json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        if model != self.server.model_id:
            self._error(HTTPStatus.NOT_FOUND, f"model {model!r} not found; this server has {self.server.model_id!r}")
            return
        started = time.perf_counter()
        try:
            completion = self.server.batcher.submit(messages, sampling).result()
        except Exception as exc:  # noqa: BLE001 (whatever generation raised becomes a 500, not a dead thread)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"generation failed: {type(exc).__name__}: {exc}")
            return
        self.server.ledger.record(model, "serve", [completion], time.perf_counter() - started)
        self.server.log_exchange(messages, completion)
        self._send(HTTPStatus.OK, chat_completion_body(completion, model))

    def _authorized(self) -> bool:
        expected = self.server.api_key
        if expected is None or self.headers.get("Authorization") == f"Bearer {expected}":
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "invalid or missing API key")
        return False

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": status.phrase, "code": status.value}})

    def _send(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped waiting (its timeout): not our error
            log.debug("client %s left before its reply", self.address_string())
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


def make_server(
    backend: HFBackend,
    host: str = LOOPBACK,
    port: int = 8000,
    model_id: str | None = None,
    api_key: str | None = None,
    max_tokens_cap: int | None = None,
    transcript: Path | None = None,
) -> ChatServer:
    """A bound server whose batcher already runs in its own thread (port 0 picks a free port).

    Call serve_forever() to answer requests and server_close() to stop.
    """
    server = ChatServer((host, port), backend, model_id or backend.name, api_key, max_tokens_cap, transcript)
    server.batcher.start()
    return server


def serve(
    model: str = DEFAULT_MODEL,
    host: str = LOOPBACK,
    port: int = 8000,
    run_dir: Path | None = None,
    step: int | None = None,
    api_key: str | None = None,
    max_tokens_cap: int | None = None,
    transcript: Path | None = None,
) -> None:
    """Load the model (with a run's weights at ES step `step`, if given) and serve until interrupted."""
    if (run_dir is None) != (step is None):
        raise ValueError("--run-dir and --step go together: the weights of a run are those after step K")
    from coevo.llm.hf import HFBackend

    backend = HFBackend.load(model)
    model_id = backend.name
    if run_dir is not None and step is not None:
        load_run_weights(backend, run_dir, step)
        model_id = f"{backend.name}@{Path(run_dir).name}:{step}"
    server = ChatServer((host, port), backend, model_id, api_key, max_tokens_cap, transcript)
    if host != LOOPBACK and api_key is None:
        print(f"coevo serve: warning: listening on {host} without an API key", file=sys.stderr)
    print(f"coevo serve: {model_id} (weights {backend.weights_id}) on {server.url}", file=sys.stderr, flush=True)
    try:
        threading.Thread(target=server.serve_forever, name="coevo-http", daemon=True).start()
        server.batcher.run()  # generation on the main thread, until Ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def load_run_weights(backend: HFBackend, run_dir: Path, step: int) -> None:
    """Set the backend's weights to the run's after its first `step` ES updates (0: the base model)."""
    from coevo.es.history import HISTORY_FILENAME, ESHistory, replay

    path = Path(run_dir) / HISTORY_FILENAME
    if not path.is_file():
        raise ValueError(f"{run_dir} has no ES history ({HISTORY_FILENAME}); is it a run directory of a weight method?")
    records = ESHistory(path).load()
    if step > len(records):
        raise ValueError(f"{path} holds {len(records)} ES updates; --step must be at most {len(records)}")
    replay(backend.model, records[:step])


def register(app: typer.Typer) -> None:
    """Add `coevo serve` to the coevo command line."""

    @app.command("serve")
    def serve_command(
        model: Annotated[
            str, typer.Option(help="Embedded model name or a local transformers model directory.")
        ] = DEFAULT_MODEL,
        run_dir: Annotated[
            Path | None, typer.Option(help="Run directory whose ES history gives the weights (with --step).")
        ] = None,
        step: Annotated[
            int | None, typer.Option(min=0, help="How many of the run's ES updates to apply (0: the base model).")
        ] = None,
        host: Annotated[str, typer.Option(help="Interface to bind; loopback unless you mean otherwise.")] = LOOPBACK,
        port: Annotated[int, typer.Option(min=0, max=65535)] = 8000,
        api_key: Annotated[
            str | None, typer.Option(envvar="COEVO_API_KEY", help="Require this bearer token from clients.")
        ] = None,
        max_tokens_cap: Annotated[
            int | None, typer.Option(min=1, help="Most new tokens per answer, whatever the client asks or omits.")
        ] = None,
        transcript: Annotated[
            Path | None, typer.Option(help="Append every answered request (messages, answer, tokens) to this file.")
        ] = None,
    ) -> None:
        """Serve a model over an OpenAI-compatible API (/v1/chat/completions, /v1/models)."""
        try:
            serve(model, host, port, run_dir, step, api_key, max_tokens_cap, transcript)
        except (ValueError, ModelNotFoundError, OSError) as exc:
            print(f"coevo: error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
