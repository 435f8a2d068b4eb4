"""The OpenAI-compatible client against the real `coevo serve` server on loopback, faults included.

Faults come from a small HTTP proxy in front of the server that misbehaves on chosen requests (late,
500, 429, malformed JSON, connection dropped) and forwards the rest, so retries meet a real server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import typer
from tiny_lm import build_tiny_llama, build_tiny_tokenizer
from typer.testing import CliRunner

from coevo.es.noise import NOISE_VERSION
from coevo.es.perturbation import Update
from coevo.es.update_log import HISTORY_FILENAME, ESHistory, UpdateRecord, replay
from coevo.llm import serve as serve_module
from coevo.llm.base import LLM, SamplingParams
from coevo.llm.chat_api import MAX_CHOICES, parse_chat_request
from coevo.llm.hf import HFBackend
from coevo.llm.openai_compat import LLMServerError, OpenAICompatLLM
from coevo.llm.seeds import request_seed
from coevo.llm.serve import ChatServer, load_run_weights, make_server, register

pytestmark = pytest.mark.timeout(300)  # nothing may hang: a stuck retry loop fails the test

CAT = [{"role": "user", "content": "the cat sat on the mat"}]
COUNT = [{"role": "user", "content": "one two three four five six"}]
SHORT = SamplingParams(max_new_tokens=6, temperature=1.0, seed=5)
CLIENT_TIMEOUT_S = 6.0  # well above a tiny-model reply on a busy machine...
SLOW_REPLY_S = 12.0  # ...and well below the injected delay


@contextmanager
def _serving(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tiny_tokenizer()
    build_tiny_llama(tokenizer.vocab_size).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def backend(model_dir: Path) -> HFBackend:
    return HFBackend.load(str(model_dir))


@pytest.fixture(scope="module")
def server(backend: HFBackend) -> Iterator[ChatServer]:
    with _serving(make_server(backend, port=0)) as running:
        yield running


@pytest.fixture
def batch_sizes(backend: HFBackend, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the size of every batch the server's batcher hands to the backend."""
    sizes: list[int] = []
    real = backend.generate_each

    def recording(items, *listeners):  # type: ignore[no-untyped-def]
        sizes.append(len(items))
        return real(items, *listeners)

    monkeypatch.setattr(backend, "generate_each", recording)
    return sizes


class FaultProxy(ThreadingHTTPServer):
    """Forwards to `upstream`; request number k (from 0) suffers `faults[k]` if there is one."""

    daemon_threads = True

    def __init__(self, upstream: str, faults: dict[int, str] | Callable[[int], str | None]) -> None:
        super().__init__(("127.0.0.1", 0), _FaultHandler)
        self.upstream = upstream
        self.fault_for = faults.get if isinstance(faults, dict) else faults
        self.seen = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def next_fault(self) -> str | None:
        with self._lock:
            number, self.seen = self.seen, self.seen + 1
        return self.fault_for(number)


class _FaultHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        fault = self.server.next_fault()
        if fault == "drop":  # close the socket without a word
            self.close_connection = True
            return
        if fault == "500":
            self._reply(500, b'{"error": {"message": "injected failure"}}')
        elif fault == "429":
            self._reply(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0"})
        elif fault == "malformed":
            self._reply(200, b'{"choices": [{"message": ')
        elif fault == "slow":  # answers, but only long after the client's timeout
            time.sleep(SLOW_REPLY_S)
            try:
                self._reply(200, b'{"choices": []}')
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
        else:
            upstream = httpx.post(f"{self.server.upstream}{self.path[len('/v1') :]}", content=body, timeout=60)
            self._reply(upstream.status_code, upstream.content)

    def _reply(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _client(url: str, model: str, **options: float) -> OpenAICompatLLM:
    settings = {"timeout_s": 30.0, "max_retries": 3, "backoff_s": 0.05, "max_backoff_s": 0.2, **options}
    return OpenAICompatLLM(url, model, **settings)  # type: ignore[arg-type]


def _outcome(completion):  # type: ignore[no-untyped-def]
    return completion.text, completion.completion_tokens, completion.finish_reason, completion.prompt_tokens


def test_served_completions_equal_in_process_ones_and_are_batched(
    server: ChatServer, backend: HFBackend, batch_sizes: list[int]
) -> None:
    with _client(server.url, backend.name, concurrency=4) as client:
        assert isinstance(client, LLM) and not client.supports_weights
        served = client.generate([CAT, COUNT, CAT, COUNT], SHORT)
    served_batches = list(batch_sizes)
    in_process = backend.generate([CAT, COUNT, CAT, COUNT], SHORT)

    assert [_outcome(c) for c in served] == [_outcome(c) for c in in_process]
    assert all(c.weights_id is None for c in served)
    assert max(served_batches) > 1  # concurrent requests shared a forward pass
    assert sum(served_batches) == 4


def test_models_endpoint_lists_the_served_model(server: ChatServer, backend: HFBackend) -> None:
    with _client(server.url, backend.name) as client:
        assert client.list_models() == [backend.name]


def test_unknown_model_fails_at_once_with_one_line(server: ChatServer) -> None:
    proxy = FaultProxy(server.url, {})
    with (
        _serving(proxy),
        _client(proxy.url, "no-such-model") as client,
        pytest.raises(LLMServerError, match="not found") as info,
    ):
        client.generate([CAT], SHORT)
    assert "\n" not in str(info.value) and "no-such-model" in str(info.value)
    assert proxy.seen == 1  # never retried


def test_wrong_api_key_is_an_authentication_error(backend: HFBackend) -> None:
    guarded = make_server(backend, port=0, api_key="right")
    with _serving(guarded):
        with (
            OpenAICompatLLM(guarded.url, backend.name, api_key="wrong") as client,
            pytest.raises(LLMServerError, match="authentication failed") as info,
        ):
            client.generate([CAT], SHORT)
        assert "\n" not in str(info.value)
        with OpenAICompatLLM(guarded.url, backend.name, api_key="right") as client:
            assert client.generate([CAT], SHORT)[0].completion_tokens >= 1


@pytest.mark.parametrize("fault", ["slow", "500", "429", "malformed", "drop"])
def test_a_transient_fault_is_retried_and_the_call_succeeds(server: ChatServer, backend: HFBackend, fault: str) -> None:
    proxy = FaultProxy(server.url, {0: fault})
    with _serving(proxy), _client(proxy.url, backend.name, timeout_s=CLIENT_TIMEOUT_S) as client:
        started = time.monotonic()
        (completion,) = client.generate([CAT], SHORT)
    assert proxy.seen == 2
    assert _outcome(completion) == _outcome(backend.generate([CAT], SHORT)[0])
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    ("fault", "reason"), [("500", "HTTP 500"), ("drop", "connection failed"), ("malformed", "malformed JSON")]
)
def test_a_persistent_fault_ends_in_one_line_after_bounded_retries(server: ChatServer, fault: str, reason: str) -> None:
    proxy = FaultProxy(server.url, lambda _: fault)
    with _serving(proxy), _client(proxy.url, "any", max_retries=2) as client:
        started = time.monotonic()
        with pytest.raises(LLMServerError) as info:
            client.generate([CAT, COUNT], SHORT)
    message = str(info.value)
    assert reason in message and "gave up after 3 attempts" in message and "\n" not in message
    assert proxy.seen <= 6  # two requests x three attempts, then nothing more
    assert time.monotonic() - started < 10


def test_nothing_listening_is_a_connection_error_not_a_hang() -> None:
    with (
        _client("http://127.0.0.1:9/v1", "any", max_retries=1, timeout_s=2.0) as client,
        pytest.raises(LLMServerError, match="connection failed"),
    ):
        client.generate([CAT], SHORT)


def test_server_rejects_bad_requests_with_a_reason(server: ChatServer, backend: HFBackend) -> None:
    cases = [
        ({"model": backend.name, "messages": CAT, "n": 0}, "'n'"),
        ({"model": backend.name, "messages": CAT, "n": MAX_CHOICES + 1}, "'n'"),
        ({"model": backend.name, "messages": CAT, "stream_options": {"include_usage": True}}, "stream_options"),
        ({"model": backend.name, "messages": []}, "messages"),
        ({"model": backend.name, "messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"model": backend.name, "messages": CAT, "temperature": -1}, "temperature"),
    ]
    for body, reason in cases:
        response = httpx.post(f"{server.url}/chat/completions", json=body, timeout=30)
        assert response.status_code == 400 and reason in response.json()["error"]["message"]
    garbage = httpx.post(f"{server.url}/chat/completions", content=b"{not json", timeout=30)
    assert garbage.status_code == 400
    assert httpx.get(f"{server.url}/nowhere", timeout=30).status_code == 404


def test_server_reports_weights_and_usage(server: ChatServer, backend: HFBackend) -> None:
    body = {"model": backend.name, "messages": CAT, "max_tokens": 4, "seed": 1, "stop": "zzz"}
    reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=60).json()
    assert reply["system_fingerprint"] == backend.weights_id
    usage = reply["usage"]
    assert (
        usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["completion_tokens"] <= 4
    )
    assert json.dumps(reply)  # plain JSON all the way down


def _es_step(step: int) -> UpdateRecord:
    seeds = (10 * step + 1, 10 * step + 2)
    return UpdateRecord(
        step=step,
        seeds=seeds,
        signs=(1, 1),
        sigma=1e-2,
        raw_rewards=(1.0, 0.0),
        shaped_rewards=(1.0, -1.0),
        alpha=0.05,
        scope="full",
        noise_version=NOISE_VERSION,
        update=Update(seeds=seeds, coeffs=(0.5, -0.5), alpha=0.05),
    )


def test_serving_a_run_at_step_k_replays_its_first_k_updates(model_dir: Path, tmp_path: Path) -> None:
    history = ESHistory(tmp_path / HISTORY_FILENAME)
    for step in range(2):
        history.append(_es_step(step))
    ids = []
    for step in range(3):
        served = HFBackend.load(str(model_dir))
        load_run_weights(served, tmp_path, step)
        expected = HFBackend.load(str(model_dir))
        replay(expected.model, history.load()[:step])
        assert served.weights_id == expected.weights_id
        ids.append(served.weights_id)
    assert len(set(ids)) == 3  # step 0 is the base model; each update moves the weights

    with pytest.raises(ValueError, match="holds 2 ES updates; --step must be at most 2"):
        load_run_weights(HFBackend.load(str(model_dir)), tmp_path, 3)
    with pytest.raises(ValueError, match="has no ES history"):
        load_run_weights(HFBackend.load(str(model_dir)), tmp_path / "elsewhere", 1)


def test_serve_command_wants_run_dir_and_step_together(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps `serve` a named sub-command
    result = CliRunner().invoke(app, ["serve", "--run-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--run-dir and --step go together" in result.output


def test_serve_entry_point_answers_until_terminated(model_dir: Path) -> None:
    """`serve()` as `coevo serve` runs it: its own process, generation on its main thread."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = f"from coevo.llm.serve import serve; serve(model={str(model_dir)!r}, port={port})"
    process = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        banner = next((line for line in process.stderr if "coevo serve:" in line), "exited without a banner")
        assert f"http://127.0.0.1:{port}/v1" in banner  # printed once the socket is bound
        with _client(f"http://127.0.0.1:{port}/v1", model_dir.name) as client:
            assert client.generate([CAT, COUNT], SHORT)[1].completion_tokens >= 1
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_max_tokens_cap_bounds_every_answer_and_fills_in_a_missing_limit(backend: HFBackend) -> None:
    """LLM4AD's OpenAIAPI sends no max_tokens; OpenEvolve may ask for more than the comparison allows."""
    base = {"model": backend.name, "messages": CAT}
    assert parse_chat_request(base, max_tokens_cap=384).sampling.max_new_tokens == 384
    assert parse_chat_request({**base, "max_tokens": 4096}, max_tokens_cap=384).sampling.max_new_tokens == 384
    assert parse_chat_request({**base, "max_tokens": 10}, max_tokens_cap=384).sampling.max_new_tokens == 10
    assert parse_chat_request(base).sampling.max_new_tokens == SamplingParams().max_new_tokens


def test_real_openai_client_bodies_are_served_and_counted_in_the_ledger(backend: HFBackend) -> None:
    """The request shapes of the peer frameworks, sent by the `openai` package itself: LLM4AD's
    (model and messages only) and OpenEvolve's (temperature, top_p, max_tokens and a fixed seed)."""
    openai = pytest.importorskip("openai")
    with _serving(make_server(backend, port=0, max_tokens_cap=5)) as server:
        client = openai.OpenAI(base_url=server.url, api_key="unused", timeout=60)
        before = httpx.get(f"{server.url}/ledger", timeout=30).json()
        bare = client.chat.completions.create(model=backend.name, messages=CAT, stream=False)
        seeded = client.chat.completions.create(
            model=backend.name, messages=COUNT, temperature=0.7, top_p=0.95, max_tokens=4096, seed=42
        )
        after = httpx.get(f"{server.url}/ledger", timeout=30).json()
    assert bare.usage.completion_tokens <= 5 and seeded.usage.completion_tokens <= 5
    assert after["requests"] - before["requests"] == 2
    served = bare.usage.completion_tokens + seeded.usage.completion_tokens
    assert after["completion_tokens"] - before["completion_tokens"] == served
    assert after["prompt_tokens"] - before["prompt_tokens"] == bare.usage.prompt_tokens + seeded.usage.prompt_tokens


def test_the_transcript_holds_every_answer_as_the_client_got_it(backend: HFBackend, tmp_path: Path) -> None:
    """What a peer's parser was given, when the peer itself logs only what it could parse."""
    transcript = tmp_path / "transcript.jsonl"
    with _serving(make_server(backend, port=0, max_tokens_cap=3, transcript=transcript)) as server:
        replies = [
            httpx.post(f"{server.url}/chat/completions", json={"model": backend.name, "messages": m}, timeout=60).json()
            for m in (CAT, COUNT)
        ]
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [line["messages"] for line in lines] == [CAT, COUNT]
    for line, reply in zip(lines, replies, strict=True):
        assert line["answer"] == reply["choices"][0]["message"]["content"]
        assert line["finish_reason"] == reply["choices"][0]["finish_reason"]
        assert line["completion_tokens"] == reply["usage"]["completion_tokens"] <= 3


def _openai_client(server: ChatServer):  # type: ignore[no-untyped-def]
    import openai

    return openai.OpenAI(base_url=server.url, api_key="unused", timeout=60, max_retries=0)


def test_the_openai_client_streams_the_answer_it_would_get_whole(server: ChatServer, backend: HFBackend) -> None:
    client = _openai_client(server)
    asked = {"model": backend.name, "messages": COUNT, "max_tokens": 6, "temperature": 1.0, "seed": 11}
    whole = client.chat.completions.create(**asked)
    chunks = list(client.chat.completions.create(**asked, stream=True, stream_options={"include_usage": True}))

    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    *answer, last = chunks
    assert "".join(c.choices[0].delta.content or "" for c in answer) == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in answer if c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert answer[0].choices[0].delta.role == "assistant" and all(c.usage is None for c in answer)
    assert last.choices == [] and last.usage == whole.usage
    assert len({c.id for c in chunks}) == 1 and chunks[0].system_fingerprint == backend.weights_id

    plain = list(client.chat.completions.create(**asked, stream=True))
    assert all(chunk.usage is None and chunk.choices for chunk in plain)


def test_a_stream_is_server_sent_events_ending_in_done(server: ChatServer, backend: HFBackend) -> None:
    body = {"model": backend.name, "messages": CAT, "max_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{server.url}/chat/completions", json=body, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: ") :]) for line in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    first, *contents, last = [chunk["choices"][0] for chunk in chunks]
    assert first["delta"] == {"role": "assistant", "content": ""} and first["finish_reason"] is None
    assert len(contents) <= 3 and all(set(c["delta"]) == {"content"} for c in contents)  # a token a chunk
    assert last["delta"] == {} and last["finish_reason"] in ("stop", "length")


def test_n_choices_are_one_batch_each_on_its_own_seed(
    server: ChatServer, backend: HFBackend, batch_sizes: list[int]
) -> None:
    client = _openai_client(server)
    before = httpx.get(f"{server.url}/ledger", timeout=30).json()
    reply = client.chat.completions.create(model=backend.name, messages=CAT, max_tokens=6, temperature=1.0, seed=7, n=3)
    after = httpx.get(f"{server.url}/ledger", timeout=30).json()
    single = client.chat.completions.create(model=backend.name, messages=CAT, max_tokens=6, temperature=1.0, seed=7)

    assert [choice.index for choice in reply.choices] == [0, 1, 2]
    assert batch_sizes[0] == 3  # the three choices shared one forward pass
    texts = [choice.message.content for choice in reply.choices]
    assert texts[0] == single.choices[0].message.content  # n=1 is the first of n
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0, seed=7)
    seeds = [7, request_seed(7, 1), request_seed(7, 2)]
    expected = backend.generate_each([(CAT, replace(sampling, seed=seed)) for seed in seeds])
    assert texts == [c.text for c in expected]
    assert len(set(texts)) > 1  # each choice samples its own stream
    assert reply.usage.prompt_tokens == single.usage.prompt_tokens
    assert reply.usage.completion_tokens == sum(c.completion_tokens for c in expected)
    assert after["requests"] - before["requests"] == 3


@contextmanager
def _slow_steps(backend: HFBackend, seconds: float) -> Iterator[None]:
    """Every forward pass of the backend's model takes at least `seconds` longer: a decode long enough
    that 'the first token arrived before the last' is not a matter of timing noise."""
    handle = backend.model.register_forward_hook(lambda *_: time.sleep(seconds))
    try:
        yield
    finally:
        handle.remove()


def _timed_stream(client, **asked) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    """(seconds since the request, text) of each content chunk of a streamed answer."""
    started = time.perf_counter()
    return [
        (time.perf_counter() - started, chunk.choices[0].delta.content)
        for chunk in client.chat.completions.create(**asked, stream=True)
        if chunk.choices and chunk.choices[0].delta.content
    ]


def test_a_streamed_answer_arrives_token_by_token_while_it_is_decoded(server: ChatServer, backend: HFBackend) -> None:
    client = _openai_client(server)
    step_s = 0.05
    asked = {"model": backend.name, "messages": COUNT, "max_tokens": 12, "temperature": 1.0, "seed": 4}
    whole = client.chat.completions.create(**asked)
    with _slow_steps(backend, step_s):
        contents = _timed_stream(client, **asked)
    assert "".join(text for _, text in contents) == whole.choices[0].message.content
    assert len(contents) >= 4  # one chunk per visible token, not one for the whole answer
    (first, _), (last, _) = contents[0], contents[-1]
    assert last - first > step_s * (len(contents) - 1) / 2  # each came a decode step after the one before


def test_concurrent_streams_share_a_batch_and_each_gets_its_own_answer(
    server: ChatServer, backend: HFBackend, batch_sizes: list[int]
) -> None:
    client = _openai_client(server)
    asks = [
        {"model": backend.name, "messages": messages, "max_tokens": 8, "temperature": 1.0, "seed": 21}
        for messages in (CAT, COUNT)
    ]
    with _slow_steps(backend, 0.01), ThreadPoolExecutor(2) as pool:
        streamed = list(pool.map(lambda asked: "".join(text for _, text in _timed_stream(client, **asked)), asks))
    assert max(batch_sizes) == 2  # the two streams were decoded together
    assert streamed == [client.chat.completions.create(**asked).choices[0].message.content for asked in asks]


def test_a_generation_failure_ends_a_stream_with_an_error_event(
    server: ChatServer, backend: HFBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(items, listeners=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("out of memory")

    monkeypatch.setattr(backend, "generate_each", failing)
    body = {"model": backend.name, "messages": CAT, "max_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{server.url}/chat/completions", json=body, timeout=60) as response:
        events = [json.loads(line[len("data: ") :]) for line in response.iter_lines() if line]
    assert events[-1]["error"]["message"] == "generation failed: RuntimeError: out of memory"
    assert not any(choice["finish_reason"] for event in events[:-1] for choice in event["choices"])
    with pytest.raises(Exception, match="out of memory"):  # the openai client raises on the event
        list(_openai_client(server).chat.completions.create(**{**body, "stream": True}))


def test_n_choices_stream_by_index(server: ChatServer, backend: HFBackend) -> None:
    client = _openai_client(server)
    asked = {"model": backend.name, "messages": COUNT, "max_tokens": 5, "temperature": 1.0, "seed": 3, "n": 2}
    whole = client.chat.completions.create(**asked)
    streamed = {0: "", 1: ""}
    for chunk in client.chat.completions.create(**asked, stream=True):
        for choice in chunk.choices:
            streamed[choice.index] += choice.delta.content or ""
    assert streamed == {c.index: c.message.content for c in whole.choices}


def test_serving_imports_nothing_above_the_llm_layer() -> None:
    """Issue 30: `coevo.llm.serve` must not reach up into the operators for its ledger."""
    code = "import sys, coevo.llm.serve; print(sorted(m for m in sys.modules if m.startswith('coevo.operators')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_an_oversized_body_is_refused_whether_declared_or_streamed(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_module, "MAX_BODY_BYTES", 100)
    body = json.dumps({"model": "any", "messages": [{"role": "user", "content": "x" * 200}]}).encode()
    declared = httpx.post(f"{server.url}/chat/completions", content=body, timeout=30)
    chunked = httpx.post(f"{server.url}/chat/completions", content=iter([body[:90], body[90:]]), timeout=30)
    for response in (declared, chunked):
        assert response.status_code == 413 and "over 100 bytes" in response.json()["error"]["message"]
