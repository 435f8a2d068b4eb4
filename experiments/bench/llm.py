"""LLM throughput on the embedded SmolLM2: in-process batch 1 vs batch 8, and served at concurrency 8.

Usage: python experiments/bench/llm.py [--json] [--tokens N] [--rounds R] [--compare-serve "COMMAND"]

The same 8 seeded requests run three ways: one at a time in-process, as one batch of 8 in-process, and
through `coevo serve` (a separate process) + `OpenAICompatLLM` with 8 requests in flight. Per-request
seeds make all three produce the same tokens, so the token counts are equal and the timings compare
directly. Targets: batch8_over_batch1 >= 3, served_over_inprocess >= 0.95. `--compare-serve` starts a
second server (any command that takes `--model` and `--port`, e.g. another checkout's `coevo serve`)
and measures it in the same rounds: `served_over_compared` is this server's speed over that one's.

Both sides run under one thread policy, printed with the counts each side's torch got: the user's
`OMP_NUM_THREADS` where set (the server inherits it), else coevo's default (`coevo.threads`), which the
in-process side applies as `coevo serve` does. A compared server follows its own.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import httpx
from rounds import alternate, cpu_name, ratio_summary

from coevo.llm.base import Completion, Message, SamplingParams
from coevo.llm.hf import DEFAULT_MODEL, HFBackend
from coevo.llm.openai_compat import OpenAICompatLLM
from coevo.llm.seeds import request_seed
from coevo.threads import THREADS_ENV, configure_threads, current_choice

TOPICS = [
    "a lighthouse keeper",
    "a robot chef",
    "a lost cat",
    "a desert city",
    "a time traveller",
    "a deep-sea diver",
    "a mountain village",
    "a clockmaker",
]
REQUESTS: list[list[Message]] = [
    [{"role": "user", "content": f"Write a long, detailed story about {topic}."}] for topic in TOPICS
]
SERVER_START_TIMEOUT_S = 180.0
SERVE_COMMAND = [sys.executable, "-m", "coevo.cli", "--verbose", "serve"]  # its thread choices go to the log
THREAD_LINE = "coevo: torch threads "


@dataclass(frozen=True)
class Measurement:
    """Generated tokens and the wall time they took; texts let the modes be checked for equality."""

    tokens: int
    seconds: float
    texts: tuple[str, ...]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    def to_json(self) -> dict[str, float]:
        return {"tokens": self.tokens, "seconds": round(self.seconds, 3), "tokens_per_s": round(self.tokens_per_s, 2)}


def _timed(run: Callable[[], list[Completion]]) -> Measurement:
    started = time.perf_counter()
    completions = run()
    seconds = time.perf_counter() - started
    return Measurement(sum(c.completion_tokens for c in completions), seconds, tuple(c.text for c in completions))


def _announced(mode: str, generate: Callable[[], list[Completion]]) -> Callable[[], Measurement]:
    """`generate`, timed, its measurement printed to stderr as it comes (a long run shows progress)."""

    def measure() -> Measurement:
        measured = _timed(generate)
        print(f"{mode} {measured.to_json()}", file=sys.stderr, flush=True)
        return measured

    return measure


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_server(serve_command: Sequence[str], model: str, port: int, log: object) -> subprocess.Popen[bytes]:
    """`coevo serve` (or another serve command) in its own process; returns once /v1/models answers."""
    command = [*serve_command, "--model", model, "--port", str(port)]
    server = subprocess.Popen(command, stdout=log, stderr=log)  # type: ignore[arg-type]
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"`{' '.join(command)}` exited with {server.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"`{' '.join(command)}` did not answer within {SERVER_START_TIMEOUT_S:g} s")


def run(
    model: str, max_new_tokens: int, rounds: int, compare_command: Sequence[str] | None = None
) -> dict[str, object]:
    """All three measurements in one process (the servers in child processes), plus the ratios.

    The modes alternate in `rounds` ABAB rounds (`rounds.py`); each ratio is the median of its
    per-round ratios, with their range, so load on a shared machine moves both sides together.
    """
    configure_threads()  # the policy `coevo serve` applies, for the in-process side too
    backend = HFBackend.load(model, max_batch_size=len(REQUESTS))
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.7, seed=2024)
    items = [(messages, replace(sampling, seed=request_seed(sampling.seed, i))) for i, messages in enumerate(REQUESTS)]
    warm_up = replace(sampling, max_new_tokens=4)
    backend.generate(REQUESTS[:1], warm_up)  # first-call allocations

    commands = {"served_concurrency8": SERVE_COMMAND}
    if compare_command:
        commands["served_compared_concurrency8"] = list(compare_command)
    with tempfile.TemporaryFile() as log, contextlib.ExitStack() as running:
        modes: dict[str, Callable[[], list[Completion]]] = {
            "inprocess_batch1": lambda: [c for item in items for c in backend.generate_each([item])],
            "inprocess_batch8": lambda: backend.generate_each(items),
        }
        for mode, command in commands.items():
            port = _free_port()
            server = _start_server(command, model, port, log)
            running.callback(server.wait, timeout=30)
            running.callback(server.terminate)
            url = f"http://127.0.0.1:{port}/v1"
            client = running.enter_context(OpenAICompatLLM(url, backend.name, concurrency=len(REQUESTS)))
            client.generate(REQUESTS[:1], warm_up)
            modes[mode] = functools.partial(client.generate, REQUESTS, sampling)
        samples = alternate({mode: _announced(mode, generate) for mode, generate in modes.items()}, rounds)
        log.seek(0)
        served_choices = [
            line.removeprefix(THREAD_LINE) for line in log.read().decode().splitlines() if line.startswith(THREAD_LINE)
        ]

    speed = {mode: [m.tokens_per_s for m in measured] for mode, measured in samples.items()}
    batch1, batch8, served = (samples[mode] for mode in ("inprocess_batch1", "inprocess_batch8", "served_concurrency8"))
    result: dict[str, object] = {
        "model": model,
        "max_new_tokens": max_new_tokens,
        "requests": len(REQUESTS),
        "rounds": rounds,
        "thread_policy": f"{THREADS_ENV}={os.environ[THREADS_ENV]}" if os.environ.get(THREADS_ENV) else "coevo default",
        "wait_policy": os.environ.get("OMP_WAIT_POLICY", "libgomp's default"),
        "inprocess_threads": current_choice().to_json(),  # type: ignore[union-attr]
        "served_thread_choices": served_choices,
        **{mode: measured[-1].to_json() for mode, measured in samples.items()},
        "same_text_in_all_three": all(a.texts == b.texts == c.texts for a, b, c in zip(batch1, batch8, served)),
        **ratio_summary("batch8_over_batch1", speed["inprocess_batch8"], speed["inprocess_batch1"]),
        **ratio_summary("served_over_inprocess", speed["served_concurrency8"], speed["inprocess_batch8"]),
        "targets": {"batch8_over_batch1": 3.0, "served_over_inprocess": 0.95},
    }
    if compare_command:
        compared = samples["served_compared_concurrency8"]
        result["same_text_as_compared"] = all(a.texts == b.texts for a, b in zip(served, compared))
        result |= ratio_summary(
            "served_over_compared", speed["served_concurrency8"], speed["served_compared_concurrency8"]
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="embedded model name or local model directory")
    parser.add_argument("--tokens", type=int, default=32, help="max new tokens per request")
    parser.add_argument("--rounds", type=int, default=4, help="ABAB rounds; ratios are medians of per-round ratios")
    parser.add_argument("--compare-serve", help="a second serve command (taking --model and --port) to measure beside")
    args = parser.parse_args(argv)
    result = run(args.model, args.tokens, args.rounds, shlex.split(args.compare_serve) if args.compare_serve else None)
    if args.json:
        print(json.dumps(result))
        return 0
    for mode in ("inprocess_batch1", "inprocess_batch8", "served_concurrency8", "served_compared_concurrency8"):
        if row := result.get(mode):
            print(f"{mode:28s} {row['tokens']:5d} tokens {row['seconds']:8.2f} s {row['tokens_per_s']:8.2f} tok/s")  # type: ignore[index]
    print(f"{cpu_name()}; thread policy, both sides: {result['thread_policy']}; wait policy: {result['wait_policy']}")
    print(f"  in-process torch threads, the last choice: {result['inprocess_threads']}")
    print(f"  served torch threads, each choice: {result['served_thread_choices']}")
    print(f"same text in all three: {result['same_text_in_all_three']}")
    if "served_over_compared" in result:
        low, high = result["served_over_compared_min"], result["served_over_compared_max"]
        print(f"same text as the compared server: {result['same_text_as_compared']}")
        print(f"{'served_over_compared':28s} {result['served_over_compared']:.3f}  (rounds {low:.3f}-{high:.3f})")
    for name, target in result["targets"].items():  # type: ignore[union-attr]
        low, high = result[f"{name}_min"], result[f"{name}_max"]
        print(f"{name:28s} {result[name]:.3f}  (rounds {low:.3f}-{high:.3f}; target >= {target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
