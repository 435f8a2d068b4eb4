"""Decode speed of the in-process backend: the lean loop (`decode="lean"`, the default) over transformers'
`generate` (`decode="generate"`) on the same seeded requests, one at a time and as one batch of 8.

Usage: python experiments/bench/decode.py [--json] [--model NAME] [--tokens N] [--rounds R] [--dtype D]
          [--anchor TOKENS_PER_S] [--record]

Both loops share one model and draw every row from its own seeded stream, so they sample the same
tokens (`same_tokens`, up to float rounding of differently shaped matmuls) and their tokens/s compare
directly. Rounds alternate the four modes; each ratio is the median of its per-round ratios. The
`_cpu` figures divide by this process's CPU time instead of wall time: on a shared machine they move
less with other people's load. `--anchor` is another engine's one-stream tokens/s on the same model
(issue 32 quotes llama.cpp's), and `lean_batch1_over_anchor` the lean loop's batch-1 figure over it.
`--record` keeps the result in experiments/evidence/results.json under "decode", one entry per model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from llm import REQUESTS
from rounds import alternate, cpu_name, ratio_summary

from coevo.llm.base import SamplingParams
from coevo.llm.hf import DEFAULT_MODEL, HFBackend
from coevo.llm.seeds import request_seed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evidence"))
from evidence_file import merge, read  # noqa: E402  (the evidence folder is not a package)


def run(model: str, max_new_tokens: int, rounds: int, dtype: str) -> dict[str, object]:
    lean = HFBackend.load(model, max_batch_size=len(REQUESTS), dtype=dtype)
    reference = HFBackend(lean.model, lean.tokenizer, lean.name, max_batch_size=len(REQUESTS), decode="generate")
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.7, seed=2024)
    items = [(messages, replace(sampling, seed=request_seed(sampling.seed, i))) for i, messages in enumerate(REQUESTS)]
    lean.generate_each(items[:1])  # first-call allocations

    def timed(backend: HFBackend, batched: bool):
        def measure() -> tuple[float, float, int, tuple[tuple[int, ...], ...]]:
            started, cpu_started = time.perf_counter(), time.process_time()
            done = backend.generate_each(items) if batched else [c for it in items for c in backend.generate_each([it])]
            seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
            print(f"{backend.decode} batch {8 if batched else 1}: {seconds:.2f} s", file=sys.stderr, flush=True)
            return seconds, cpu_seconds, sum(c.completion_tokens for c in done), tuple(c.token_ids for c in done)

        return measure

    samples = alternate(
        {
            "generate_batch1": timed(reference, False),
            "lean_batch1": timed(lean, False),
            "generate_batch8": timed(reference, True),
            "lean_batch8": timed(lean, True),
        },
        rounds,
    )
    speed = {mode: [tokens / seconds for seconds, _, tokens, _ in runs] for mode, runs in samples.items()}
    cpu = {mode: [tokens / cpu_seconds for _, cpu_seconds, tokens, _ in runs] for mode, runs in samples.items()}
    return {
        "model": model,
        "dtype": lean.compute_dtype,
        "max_new_tokens": max_new_tokens,
        "rounds": rounds,
        **{f"{mode}_tokens_per_s": round(max(values), 2) for mode, values in speed.items()},
        **{f"{mode}_tokens_per_cpu_s": round(max(values), 2) for mode, values in cpu.items()},
        "same_tokens": all(
            samples[f"lean_{size}"][r][3] == samples[f"generate_{size}"][r][3]
            for size in ("batch1", "batch8")
            for r in range(rounds)
        ),
        **ratio_summary("lean_over_generate_batch1", speed["lean_batch1"], speed["generate_batch1"]),
        **ratio_summary("lean_over_generate_batch8", speed["lean_batch8"], speed["generate_batch8"]),
        **ratio_summary("lean_over_generate_batch1_cpu", cpu["lean_batch1"], cpu["generate_batch1"]),
        **ratio_summary("lean_over_generate_batch8_cpu", cpu["lean_batch8"], cpu["generate_batch8"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="embedded model name or local model directory")
    parser.add_argument("--tokens", type=int, default=32, help="max new tokens per request")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"), help="compute dtype")
    parser.add_argument("--anchor", type=float, help="another engine's one-stream tokens/s on this model")
    parser.add_argument("--record", action="store_true", help="keep the result in the evidence file")
    args = parser.parse_args(argv)
    result = run(args.model, args.tokens, args.rounds, args.dtype)
    if args.anchor:
        result["anchor_tokens_per_s"] = args.anchor
        result["lean_batch1_over_anchor"] = round(result["lean_batch1_tokens_per_s"] / args.anchor, 3)
    result["cpu"], result["torch_threads"] = cpu_name(), torch.get_num_threads()
    if args.record:
        merge("decode", {**read("decode"), args.model: result})
    print(json.dumps(result) if args.json else "\n".join(f"{key:34s} {value}" for key, value in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
