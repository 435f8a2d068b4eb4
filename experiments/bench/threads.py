"""torch's default thread count: a generation started right after heavy work against one on an idle
machine, and the default against the one it replaced (the one-minute load average) under contention.

Usage: python experiments/bench/threads.py [--json] [--rounds R] [--heavy-s S] [--tokens N]

Every measured generation runs in a fresh process, as a user's command would: it applies its thread
policy, loads the embedded SmolLM2 and times one batch of the first 4 of `llm.py`'s seeded requests,
printing tokens/s, the thread count torch ran with, and why. Policies: `auto` is coevo's default
(`coevo.threads`: the cores the tasks runnable now leave idle, chosen at start-up and between
batches); `loadavg` is the default it replaced (fixed at start-up from the one-minute load average).
Both run under the same OpenMP wait policy: the environment's `OMP_WAIT_POLICY`, printed.

After heavy work, each round: `auto` on an idle machine; then busy loops on every usable CPU for
`--heavy-s` seconds, which end just before `auto` is started again; then `loadavg`, still within the
minute the load average remembers. Target: `after_heavy_over_idle` within 10% of 1.

Contention: busy loops on every usable CPU throughout, `auto` and `loadavg` alternating (ABAB).
Target: `auto_over_loadavg_contended` >= 1. Ratios are medians of per-round ratios (`rounds.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rounds import alternate, cpu_name, ratio_summary

POLICIES = ("auto", "loadavg")
REQUESTS_MEASURED = 4
BUSY_LOOP = """
import os
parent = os.getppid()
while os.getppid() == parent:  # ends with the benchmark, however that ends
    for _ in range(1_000_000):
        pass
"""


def loadavg_threads(usable_cpus: int, load_average: float) -> int | None:
    """The replaced default: the cores the one-minute load average leaves idle, None when all are."""
    idle = int(usable_cpus - load_average + 0.5)
    return None if idle >= usable_cpus else max(1, idle)


def generate(policy: str, max_new_tokens: int) -> dict[str, object]:
    """One timed generation in this process under `policy` (the child side of a measurement)."""
    if policy == "auto":
        from coevo.threads import configure_threads, current_choice

        configure_threads()  # as `coevo` does at start-up, before torch is imported
    else:
        load = os.getloadavg()[0]
        if (count := loadavg_threads(len(os.sched_getaffinity(0)), load)) is not None:
            os.environ["OMP_NUM_THREADS"] = str(count)  # as the replaced default did, before torch
        reason = f"one-minute load average {load:.2f} at start-up"
    import torch
    from llm import REQUESTS

    from coevo.llm.base import SamplingParams
    from coevo.llm.hf import DEFAULT_MODEL, HFBackend

    backend = HFBackend.load(DEFAULT_MODEL, max_batch_size=REQUESTS_MEASURED)
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.7, seed=2024)
    started = time.perf_counter()
    completions = backend.generate(REQUESTS[:REQUESTS_MEASURED], sampling)
    seconds = time.perf_counter() - started
    if policy == "auto":
        reason = current_choice().reason  # type: ignore[union-attr]
    tokens = sum(c.completion_tokens for c in completions)
    return {"tokens": tokens, "tokens_per_s": tokens / seconds, "threads": torch.get_num_threads(), "reason": reason}


def measured(policy: str, max_new_tokens: int, label: str) -> Callable[[], dict[str, object]]:
    """A side: `generate` in a fresh process, its line printed to stderr as it comes."""

    def measure() -> dict[str, object]:
        command = [sys.executable, __file__, "--generate", policy, "--tokens", str(max_new_tokens)]
        result = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        print(
            f"{label:22s} {result['tokens_per_s']:7.2f} tok/s  threads {result['threads']}  ({result['reason']})",
            file=sys.stderr,
            flush=True,
        )
        return result

    return measure


@contextlib.contextmanager
def busy_loops() -> Iterator[None]:
    """One busy process per usable CPU while the block runs; all of them ended when it returns."""
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in os.sched_getaffinity(0)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


def after_heavy_work(side: Callable[[], dict[str, object]], heavy_s: float) -> Callable[[], dict[str, object]]:
    """`side`, started as soon as `heavy_s` seconds of busy loops on every usable CPU have ended."""

    def measure() -> dict[str, object]:
        with busy_loops():
            time.sleep(heavy_s)
        print(f"{'':22s} one-minute load average after the heavy work: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        return side()

    return measure


def load_now() -> str:
    """The load averages and the runnable/total task counts, as /proc/loadavg says."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:4])


def run(rounds: int, heavy_s: float, max_new_tokens: int) -> dict[str, object]:
    """Both scenarios, each in `rounds` alternating rounds; the ratios with their ranges."""
    load_before = load_now()
    after = alternate(
        {
            "auto_idle": measured("auto", max_new_tokens, "auto, idle"),
            "auto_after_heavy": after_heavy_work(measured("auto", max_new_tokens, "auto, after heavy"), heavy_s),
            "loadavg_after_heavy": measured("loadavg", max_new_tokens, "loadavg, after heavy"),
        },
        rounds,
    )
    with busy_loops():
        contended = alternate(
            {policy: measured(policy, max_new_tokens, f"{policy}, contended") for policy in POLICIES}, rounds
        )
    speed = {name: [float(r["tokens_per_s"]) for r in results] for name, results in (after | contended).items()}  # type: ignore[arg-type]
    return {
        "cpu": cpu_name(),
        "cpus": len(os.sched_getaffinity(0)),
        "wait_policy": os.environ.get("OMP_WAIT_POLICY", "libgomp's default"),
        "load_before": load_before,
        "load_after": load_now(),
        "rounds": rounds,
        "heavy_s": heavy_s,
        "max_new_tokens": max_new_tokens,
        "threads": {name: [r["threads"] for r in results] for name, results in (after | contended).items()},
        **ratio_summary("after_heavy_over_idle", speed["auto_after_heavy"], speed["auto_idle"]),
        **ratio_summary("loadavg_after_heavy_over_idle", speed["loadavg_after_heavy"], speed["auto_idle"]),
        **ratio_summary("auto_over_loadavg_contended", speed["auto"], speed["loadavg"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of each scenario")
    parser.add_argument("--heavy-s", type=float, default=60.0, help="seconds of busy loops before a measurement")
    parser.add_argument("--tokens", type=int, default=32, help="max new tokens per request")
    parser.add_argument("--generate", choices=POLICIES, help=argparse.SUPPRESS)  # a measured child
    args = parser.parse_args(argv)
    if args.generate:
        print(json.dumps(generate(args.generate, args.tokens)))
        return 0
    result = run(args.rounds, args.heavy_s, args.tokens)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['cpu']}, {result['cpus']} usable CPUs; OpenMP wait policy, both sides: {result['wait_policy']}")
    print(f"load (1, 5, 15 min; runnable/tasks) before: {result['load_before']}; after: {result['load_after']}")
    print(f"{args.rounds} rounds, {args.heavy_s:g} s of heavy work, {REQUESTS_MEASURED} x {args.tokens} tokens")
    for name, counts in result["threads"].items():  # type: ignore[union-attr]
        print(f"threads {name:22s} {counts}")
    for name, target in (
        ("after_heavy_over_idle", "within 0.9-1.1"),
        ("loadavg_after_heavy_over_idle", "the replaced default, for reference"),
        ("auto_over_loadavg_contended", ">= 1"),
    ):
        low, high = result[f"{name}_min"], result[f"{name}_max"]
        print(f"{name:30s} {result[name]:.3f}  (rounds {low:.3f}-{high:.3f}; target {target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
