"""GPU check of the vLLM backend: perturb / restore / update through collective_rpc, with timings.

Checks, on one GPU, in well under 5 minutes for a 0.5B model:
1. restore is exact: the live weights' SHA-256 after perturb + restore equals the base one;
2. greedy outputs change under a perturbation and come back, token for token, after restore;
3. the same noise as the ES engine: vLLM's fused weights, perturbed by seed S, hold per canonical
   parameter exactly what a transformers copy of the model holds when `TorchWeightsHost` perturbs it
   by seed S (compared by per-parameter sums; skip with --no-transformers);
4. an ES update moves the weights (new SHA-256) and the weights_id follows.
Exits 1 if a check fails. Prints one JSON object of results and timings at the end.

Setup on the GPU machine (vLLM pins its own torch and transformers, so coevo goes in without deps):
    pip install vllm pydantic && pip install --no-deps -e .  (builds coevo's C noise kernels)
Usage:
    python experiments/bench/vllm_check.py [--model Qwen/Qwen2.5-0.5B-Instruct | DIR] [--sigma 0.01]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from coevo.es.perturbation import Perturbation, Update
from coevo.llm.base import SamplingParams
from coevo.llm.vllm import VLLMBackend

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Python one-liner that reverses a string s.",
    "In one sentence: what is a greedy algorithm?",
    "Write a Python function that checks whether a number is prime.",
    "Name three sorting algorithms.",
    "Write a Python function that returns the Euclidean distance between two 2-D points.",
    "What does the nearest-neighbour heuristic for the TSP do? One sentence.",
    "Write a Python function that sums the values of a dict.",
]


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def transformers_sums(model: str, seed: int, sigma: float, dtype: str) -> dict[str, float]:
    """Per-parameter sums of a transformers copy perturbed by the ES host itself (the reference)."""
    import torch
    from transformers import AutoModelForCausalLM

    from coevo.es.host import TorchWeightsHost

    reference = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).to("cuda")
    host = TorchWeightsHost(reference)
    with host.perturbed(Perturbation(seed=seed, sigma=sigma)):
        return {n: float(p.detach().double().sum()) for n, p in host.module.named_parameters()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="hub id or local model directory")
    parser.add_argument("--sigma", type=float, default=0.01, help="perturbation scale (large enough to flip tokens)")
    parser.add_argument("--seed", type=int, default=1234, help="perturbation seed")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--no-transformers", action="store_true", help="skip the comparison with transformers")
    args = parser.parse_args()

    results: dict[str, Any] = {"model": args.model, "sigma": args.sigma}
    failures: list[str] = []

    def check(name: str, passed: bool) -> None:
        results[name] = passed
        print(f"{'PASS' if passed else 'FAIL'}  {name}", flush=True)
        if not passed:
            failures.append(name)

    backend, results["load_s"] = timed(
        lambda: VLLMBackend(args.model, dtype=args.dtype, gpu_memory_utilization=0.5, seed=0)
    )
    host = backend.host
    results["evolved_weights"] = host.num_evolved
    conversations = [[{"role": "user", "content": prompt}] for prompt in PROMPTS]
    greedy = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.0)

    def generate() -> list[str]:
        return [c.text for c in backend.generate(conversations, greedy)]

    base_sha, results["sha256_s"] = timed(host.weights_sha256)
    base_id, results["weights_id_s"] = timed(lambda: backend.weights_id)
    base, seconds = timed(lambda: backend.generate(conversations, greedy))
    results["batch8_tokens_per_s"] = sum(c.completion_tokens for c in base) / seconds
    base_texts = [c.text for c in base]
    perturbation = Perturbation(seed=args.seed, sigma=args.sigma)

    _, results["perturb_s"] = timed(lambda: host.perturb(perturbation))
    perturbed_id = backend.weights_id
    perturbed_texts = generate()
    vllm_sums = host.canonical_sums()
    _, results["restore_s"] = timed(host.restore)

    check("restore_is_exact", host.weights_sha256() == base_sha)
    check("weights_id_tracks_perturbation", perturbed_id != base_id == backend.weights_id)
    results["outputs_changed"] = sum(a != b for a, b in zip(base_texts, perturbed_texts))
    check("outputs_change_under_perturbation", results["outputs_changed"] > 0)
    check("outputs_return_after_restore", generate() == base_texts)

    if not args.no_transformers:
        reference = transformers_sums(args.model, args.seed, args.sigma, args.dtype)
        mismatched = [n for n, total in reference.items() if vllm_sums.get(n) != total]
        results["sum_mismatches"] = mismatched[:5]
        check("same_noise_as_transformers", not mismatched and set(reference) == set(vllm_sums))

    update = Update(seeds=(args.seed, args.seed + 1), coeffs=(1.0, -0.5), alpha=args.sigma)
    _, results["apply_update_s"] = timed(lambda: host.apply_update(update))
    check("update_moves_weights", host.weights_sha256() != base_sha and backend.weights_id != base_id)
    results["updated_sample"] = generate()[0][:120]

    print(json.dumps(results, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
