"""`coevo serve`: the in-process model behind an OpenAI-compatible HTTP API.

Other tools (DSPy, agents, the `openai` SDK, `OpenAICompatLLM`) can then use the embedded model, or an
evolved one: the weights of a run's ES history at step K. Offered: `/v1/models`, `/v1/chat/completions`
(streamed or not, `n` choices; the wire format is `coevo.llm.chat_api`), and `/v1/ledger` (coevo's own):
the calls and tokens served so far, so frameworks that count their budgets differently can be compared by
what they asked of the model. `max_tokens_cap` bounds every answer, whatever the client asks or omits
(some clients send no max_tokens). Concurrent requests, and the choices of one request, are generated
as one batch by the `DynamicBatcher`. A streamed answer is sent as it is decoded: the decode loop hands
each new token to the choice's `TextStream`, whose text deltas cross from the batching thread to the
event loop through the request's queue (`_Deltas`). `system_fingerprint` carries the weights id. With
a transcript file, every answered choice is appended to it as one JSON line (messages, answer, finish
reason, tokens): what a client's parser was given, when a framework reports only what it parsed.

The HTTP side is Starlette on uvicorn, in one event loop: a waiting request costs no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future
from dataclasses import asdict
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from coevo.llm.base import Completion, Message, TextListener
from coevo.llm.batcher import DynamicBatcher
from coevo.llm.chat_api import BadRequest, ChunkWriter, chat_completion_body, parse_chat_request, sse_event
from coevo.llm.embedded import DEFAULT_MODEL, ModelNotFoundError
from coevo.llm.ledger import BudgetLedger
from coevo.threads import configure_threads

if TYPE_CHECKING:  # torch is heavy: imported only when a model is actually served
    from coevo.llm.hf import HFBackend

MAX_BODY_BYTES = 8 << 20
LOOPBACK = "127.0.0.1"
SHUTDOWN_GRACE_S = 5
"""How long stopping the server waits for replies still in flight."""


class _TooLarge(Exception):
    """The request body is over MAX_BODY_BYTES."""


def _error_body(status: HTTPStatus, message: str) -> dict[str, dict[str, str | int]]:
    return {"error": {"message": message, "type": status.phrase, "code": status.value}}


def _error(status: HTTPStatus, message: str) -> JSONResponse:
    return JSONResponse(_error_body(status, message), status.value)


class _Deltas:
    """Carries the text of a streamed request's choices from the batching thread to the event loop:
    (choice, delta) items in decoding order, then (choice, None) once that choice's answer is done."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[tuple[int, str | None]] = asyncio.Queue()

    def listener(self, index: int) -> TextListener:
        return functools.partial(self._put, index)

    def watch(self, index: int, answer: Future[Completion]) -> None:
        """Mark choice `index` done when `answer` resolves: after all its deltas, on the same thread."""
        answer.add_done_callback(lambda _: self._put(index, None))

    async def get(self) -> tuple[int, str | None]:
        return await self._queue.get()

    def _put(self, index: int, text: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped, nobody reads
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (index, text))


async def _read_body(request: Request) -> bytes:
    """The body, or _TooLarge as soon as it is known to be over the limit (declared or sent)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _TooLarge
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > MAX_BODY_BYTES:
            raise _TooLarge
    return bytes(body)


class ChatServer:
    """The HTTP API over one backend, bound at construction (port 0 picks a free port).

    `serve_forever()` answers requests until `shutdown()` (from another thread); `server_close()`
    releases the socket and the batcher. All generation goes through the shared `DynamicBatcher`,
    whose `run()` someone must call (see `make_server` and `serve`).
    """

    def __init__(
        self,
        address: tuple[str, int],
        backend: HFBackend,
        model_id: str,
        api_key: str | None,
        max_tokens_cap: int | None = None,
        transcript: Path | None = None,
    ) -> None:
        self.socket = socket.create_server(address)
        self.model_id = model_id
        self.api_key = api_key
        self.max_tokens_cap = max_tokens_cap
        self.backend = backend
        self.ledger = BudgetLedger()
        self.transcript = transcript
        self._transcript_lock = threading.Lock()
        self.batcher = DynamicBatcher(backend, max_batch=backend.max_batch_size)
        config = uvicorn.Config(
            self.asgi,
            interface="asgi3",
            proxy_headers=False,
            log_config=None,  # coevo's logging stays as the caller set it
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )
        self._http = uvicorn.Server(config)
        self._stopped = threading.Event()
        self._stopped.set()  # not serving yet: shutdown() has nothing to wait for

    @property
    def url(self) -> str:
        """Base URL of the API, e.g. http://127.0.0.1:8000/v1."""
        host, port = self.socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def serve_forever(self) -> None:
        """Answer requests until shutdown()."""
        self._stopped.clear()
        try:
            self._http.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever() (running in another thread) and wait until it has returned."""
        self._http.should_exit = True
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()
        self.batcher.close()

    def log_exchange(self, messages: Sequence[Message], completions: Sequence[Completion]) -> None:
        """Append one line per answered choice to the transcript, if there is one."""
        if self.transcript is None:
            return
        lines = [
            {
                "time": time.time(),
                "messages": list(messages),
                "choice": index,
                "answer": completion.text,
                "finish_reason": completion.finish_reason,
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
            }
            for index, completion in enumerate(completions)
        ]
        with self._transcript_lock, self.transcript.open("a") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI application: one route table, JSON errors in OpenAI's shape."""
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        route = (request.method, request.url.path.rstrip("/"))
        raw = b""
        if request.method == "POST":
            try:
                raw = await _read_body(request)
            except _TooLarge:
                return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes")
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(HTTPStatus.UNAUTHORIZED, "invalid or missing API key")
        if route == ("GET", "/v1/models"):
            entry = {"id": self.model_id, "object": "model", "created": 0, "owned_by": "coevo"}
            return JSONResponse({"object": "list", "data": [entry]})
        if route == ("GET", "/v1/ledger"):
            return JSONResponse(asdict(self.ledger.usage()))
        if route == ("POST", "/v1/chat/completions"):
            return await self._chat(raw)
        return _error(HTTPStatus.NOT_FOUND, f"no route {request.method} {request.url.path}")

    async def _chat(self, raw: bytes) -> Response:
        try:
            chat = parse_chat_request(json.loads(raw), self.max_tokens_cap)
        except (BadRequest, json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        if chat.model != self.model_id:
            return _error(HTTPStatus.NOT_FOUND, f"model {chat.model!r} not found; this server has {self.model_id!r}")
        started = time.perf_counter()
        deltas = _Deltas(asyncio.get_running_loop()) if chat.stream else None
        futures = [
            self.batcher.submit(chat.messages, sampling, deltas.listener(index) if deltas else None)
            for index, sampling in enumerate(chat.choice_samplings())
        ]
        if deltas is not None:
            for index, future in enumerate(futures):
                deltas.watch(index, future)
        answers = asyncio.gather(*map(asyncio.wrap_future, futures))
        # Registered before anyone awaits `answers`, so it runs first: the ledger and transcript hold a
        # request before its reply is sent, and a streamed one is counted even if its client hangs up.
        answers.add_done_callback(functools.partial(self._account, chat.messages, started))
        if deltas is not None:
            fingerprint = await asyncio.to_thread(lambda: self.backend.weights_id)
            writer = ChunkWriter(chat.model, fingerprint, chat.include_usage)
            events = _stream_events(writer, futures, deltas)
            return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            completions = await answers
        except Exception as exc:  # noqa: BLE001 (whatever generation raised becomes a 500, not a dead server)
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR, _failure(exc))
        return JSONResponse(chat_completion_body(completions, chat.model))

    def _account(self, messages: Sequence[Message], started: float, answers: asyncio.Future[list[Completion]]) -> None:
        """Count an answered request in the ledger and the transcript (a failed one is not answered)."""
        if answers.cancelled() or answers.exception() is not None:
            return
        completions = answers.result()
        self.ledger.record(self.model_id, "serve", completions, time.perf_counter() - started)
        self.log_exchange(messages, completions)


def _failure(exc: BaseException) -> str:
    return f"generation failed: {type(exc).__name__}: {exc}"


async def _stream_events(
    writer: ChunkWriter, futures: Sequence[Future[Completion]], deltas: _Deltas
) -> AsyncIterator[bytes]:
    """A streamed reply as server-sent events: each choice's text as it is decoded, then its finish
    reason; a failed generation ends the stream with an error event (the status line is already sent)."""
    for index in range(len(futures)):
        yield sse_event(writer.opening(index))
    still_open = len(futures)
    while still_open:
        index, text = await deltas.get()
        if text is not None:
            yield sse_event(writer.content(index, text))
            continue
        still_open -= 1
        failure = futures[index].exception()
        if failure is not None:
            yield sse_event(_error_body(HTTPStatus.INTERNAL_SERVER_ERROR, _failure(failure)))
            return
        yield sse_event(writer.finish(index, futures[index].result().finish_reason))
    if writer.include_usage:
        yield sse_event(writer.usage([future.result() for future in futures]))
    yield sse_event("[DONE]")


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
    threads: int | None = None,
) -> None:
    """Load the model (with a run's weights at ES step `step`, if given) and serve until interrupted.

    `threads` sets torch's thread count; by default `coevo.threads` gives torch the cores other work
    leaves idle, chosen again between batches."""
    if (run_dir is None) != (step is None):
        raise ValueError("--run-dir and --step go together: the weights of a run are those after step K")
    configure_threads(threads)
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
        server.shutdown()
        server.server_close()


def load_run_weights(backend: HFBackend, run_dir: Path, step: int) -> None:
    """Set the backend's weights to the run's after its first `step` ES updates (0: the base model)."""
    from coevo.es.update_log import HISTORY_FILENAME, ESHistory, replay

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
        threads: Annotated[
            int | None,
            typer.Option(
                min=1, help="Torch threads (default: the cores other work leaves idle, re-checked as it serves)."
            ),
        ] = None,
    ) -> None:
        """Serve a model over an OpenAI-compatible API (/v1/chat/completions, /v1/models)."""
        try:
            serve(model, host, port, run_dir, step, api_key, max_tokens_cap, transcript, threads)
        except (ValueError, ModelNotFoundError, OSError) as exc:
            print(f"coevo: error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
