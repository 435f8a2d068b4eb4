"""ES speed, memory and exactness on the embedded SmolLM2-135M (fp32, this CPU): issue 3's figures.

Usage: python experiments/bench/es.py [--json] [--quick] [--only SECTION]

Figures (targets in TARGETS):
- perturb_speedup: perturb + restore of every parameter with the reference scheme (a torch.Generator
  per tensor seeded from seed and name, randn in 8M-element chunks, add then subtract in place) over
  coevo's TorchWeightsHost (counter-based noise fused into the memory pass), both in place.
- es_over_inference: one ES generation (N=8 members, each generating for the same 8 prompts as one
  batch under its own full-rank perturbation, inplace host, plus the update) over the same 8 batched
  generations with no perturbation. Rounds interleave plain and perturbed generations, so both see the
  same machine load.
- lowrank_throughput_ratio: tokens/s of one batch-8 generation in which row i runs under low-rank
  member i (factor set-up included) over tokens/s of plain batch-8 generation of the same prompts.
- mem_es_over_inference, mem_es_over_backprop: peak RSS of fresh processes that run an inplace ES
  generation, plain inference, and one AdamW full fine-tuning step on the same batch; medians over
  three rounds, with the per-round range of the backprop ratio. The AdamW step is a fine-tuning
  loop's steady step: AdamW creates its two moment buffers lazily at the end of the first step, so
  only from the second step on does a step hold weights, moments, gradients and activations at once.
  The probe runs a warm-up step, then the measured one; the first step's own peak is printed too
  (mem_es_over_backprop_first_step), as is the ratio above the runtime (a process that loads the
  libraries and tokenizer only).
- drift_inplace_rms: rms weight drift after 1000 inplace perturb/restore cycles over the rms of one
  typical update (N=8, alpha 5e-4). Drift is per element, so it is measured on one transformer
  layer and the final norm (their norm weights near 1 drift most) to keep the run short.
Every generation is greedy with exactly `new_tokens` new tokens, so timings compare token for token.
Speed ratios come from ABAB rounds (`rounds.py`): the median of the per-round ratios, with their range
as `<figure>_min` and `<figure>_max`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost, canonical_parameters
from coevo.es.lowrank import LowRankHost
from rounds import alternate, ratio_summary, target_line
from coevo.es.perturbation import Perturbation
from coevo.llm.hf import load_causal_lm, resolve_model_dir

TARGETS: dict[str, tuple[str, float]] = {
    "perturb_speedup": (">=", 4.0),
    "es_over_inference": ("<=", 1.15),
    "lowrank_throughput_ratio": (">=", 0.8),
    "mem_es_over_inference": ("<=", 1.10),
    "mem_es_over_backprop": ("<=", 0.35),
    "drift_inplace_rms": ("<", 0.01),
}

TOPICS = [
    "sorting a list",
    "a prime test",
    "reversing a string",
    "binary search",
    "a word counter",
    "the fibonacci numbers",
    "merging two dicts",
    "a matrix transpose",
]
PROMPTS = [f"Write a short Python function for {topic}." for topic in TOPICS]
SIGMA = 1e-3  # the reference's sigma_0 (Agentic ESOpt, Zheng et al.)
ALPHA = 5e-4
REFERENCE_CHUNK = 8 * 2**20  # elements per randn call in the reference scheme
PROBES = ("runtime", "inference", "es", "backprop")
DRIFT_SCOPE = r"^model\.(layers\.15\.|norm\.)"


@dataclass(frozen=True)
class Settings:
    """Run size: the full run follows issue 3's definitions; --quick only checks that everything runs."""

    quick: bool
    population: int
    new_tokens: int
    lowrank_every: int  # time the low-rank generation in every k-th round
    perturb_repeats: int
    drift_cycles: int
    memory_rounds: int

    @classmethod
    def of(cls, quick: bool) -> Settings:
        if quick:
            return cls(
                quick, population=2, new_tokens=4, lowrank_every=1, perturb_repeats=1, drift_cycles=50, memory_rounds=1
            )
        return cls(
            quick, population=8, new_tokens=64, lowrank_every=2, perturb_repeats=5, drift_cycles=1000, memory_rounds=3
        )


def prompt_batch(tokenizer) -> dict[str, torch.Tensor]:
    """The 8 fixed prompts, chat-formatted and left-padded into one batch."""
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in PROMPTS
    ]
    return dict(tokenizer(texts, return_tensors="pt", padding=True))


def generate(model, batch: dict[str, torch.Tensor], new_tokens: int) -> torch.Tensor:
    """Greedy decoding of exactly `new_tokens` tokens per row (returns the new tokens only)."""
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    return out[:, batch["input_ids"].shape[1] :]


def distinct_token_reward(new_tokens: torch.Tensor) -> float:
    """A cheap stand-in reward (distinct tokens per row); its value does not affect any timing."""
    return float(np.mean([len(set(row.tolist())) for row in new_tokens]))


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# --- 1. perturb + restore ---------------------------------------------------------------------------


def reference_perturb_restore(model: torch.nn.Module, seed: int, sigma: float) -> None:
    """The reference scheme: per tensor, a torch.Generator seeded from (seed, name), randn in chunks."""
    for sign in (1.0, -1.0):
        for name, param in canonical_parameters(model):
            generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
            flat = param.detach().view(-1)
            for start in range(0, flat.numel(), REFERENCE_CHUNK):
                chunk = flat[start : start + REFERENCE_CHUNK]
                chunk.add_(torch.randn(chunk.numel(), generator=generator), alpha=sign * sigma)


def measure_perturb(model: torch.nn.Module, settings: Settings) -> dict[str, float]:
    host = TorchWeightsHost(model, scope="full", restore="inplace")
    member = Perturbation(seed=1, sigma=SIGMA)

    def coevo_cycle() -> None:
        host.perturb(member)
        host.restore()

    coevo_cycle()  # warm-up: the first write to each lazily mapped weight page costs a page fault
    seconds = alternate(
        {"reference": lambda: timed(lambda: reference_perturb_restore(model, 1, SIGMA)), "coevo": lambda: timed(coevo_cycle)},
        settings.perturb_repeats,
    )
    return {
        "perturb_restore_reference_s": float(np.median(seconds["reference"])),
        "perturb_restore_coevo_s": float(np.median(seconds["coevo"])),
        **ratio_summary("perturb_speedup", seconds["reference"], seconds["coevo"]),
    }


# --- 2, 3. generation time: full-rank ES and low-rank batched ES vs plain inference ------------------


def measure_generation(model, tokenizer, settings: Settings) -> dict[str, float]:
    """ABAB rounds of (plain, one full-rank member[, low-rank population]) generations.

    Each figure is the median of its per-round ratios, with their range: both sides of a ratio run
    in the same short round, so load on a shared machine moves them together.
    """
    batch = prompt_batch(tokenizer)
    host = TorchWeightsHost(model, scope="full", restore="inplace")
    engine = ESEngine(ESConfig(population_size=settings.population, sigma=SIGMA, alpha=ALPHA), host)
    lowrank = LowRankHost(model, rank=1)
    members = engine.ask()
    lowrank_members = members * (len(PROMPTS) // len(members))  # row i of the batch runs member i
    generate(model, batch, 2)  # warm-up

    def lowrank_generation() -> None:
        with lowrank.population(lowrank_members, range(len(PROMPTS))):
            generate(model, batch, settings.new_tokens)

    plain_s, member_s, lowrank_s, rewards = [], [], [], []
    for index, member in enumerate(members):
        plain_s.append(timed(lambda: generate(model, batch, settings.new_tokens)))
        started = time.perf_counter()
        with host.perturbed(member):
            rewards.append(distinct_token_reward(generate(model, batch, settings.new_tokens)))
        member_s.append(time.perf_counter() - started)
        if index % settings.lowrank_every == 0:
            lowrank_s.append(timed(lowrank_generation))
    tell_s = timed(lambda: engine.tell(members, rewards))
    tokens = len(PROMPTS) * settings.new_tokens
    return {
        "inference_generation_s": sum(plain_s),
        "es_generation_s": sum(member_s) + tell_s,
        "es_update_s": tell_s,
        # each member's round carries its share of the one update
        **ratio_summary("es_over_inference", [s + tell_s / len(member_s) for s in member_s], plain_s),
        "plain_tokens_per_s": tokens * len(plain_s) / sum(plain_s),
        "lowrank_tokens_per_s": tokens * len(lowrank_s) / sum(lowrank_s),
        **ratio_summary("lowrank_throughput_ratio", plain_s[:: settings.lowrank_every], lowrank_s),
    }


# --- 4. peak memory, each workload in a fresh process -----------------------------------------------


def run_probe(kind: str, settings: Settings) -> dict[str, int]:
    """Run one workload in this (fresh) process; its peak RSS in bytes, by figure name."""
    if kind == "runtime":
        AutoTokenizer.from_pretrained(resolve_model_dir(), local_files_only=True)
        return {kind: peak_rss_bytes()}
    model, tokenizer = load_causal_lm()
    batch = prompt_batch(tokenizer)
    if kind == "inference":
        generate(model, batch, settings.new_tokens)
    elif kind == "es":
        # Two members suffice: every member reuses the same memory; the update is part of the peak.
        host = TorchWeightsHost(model, scope="full", restore="inplace")
        engine = ESEngine(ESConfig(population_size=2, sigma=SIGMA, alpha=ALPHA), host)
        members = engine.ask()
        rewards = []
        for member in members:
            with host.perturbed(member):
                rewards.append(distinct_token_reward(generate(model, batch, settings.new_tokens)))
        engine.tell(members, rewards)
    elif kind == "backprop":
        continuation = torch.randint(
            0, model.config.vocab_size, (len(PROMPTS), settings.new_tokens), generator=torch.Generator().manual_seed(0)
        )
        input_ids = torch.cat([batch["input_ids"], continuation], dim=1)
        attention_mask = torch.cat([batch["attention_mask"], torch.ones_like(continuation)], dim=1)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        peaks = {}
        for figure in ("backprop_first_step", "backprop"):  # the warm-up step, then a steady one
            loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            peaks[figure] = peak_rss_bytes()
        return peaks
    else:
        raise ValueError(f"unknown probe {kind!r}; expected one of {PROBES}")
    return {kind: peak_rss_bytes()}


def peak_rss_bytes() -> int:
    """This process's peak RSS (VmHWM). Not ru_maxrss: a child inherits its parent's through fork."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024


def measure_memory(settings: Settings) -> dict[str, float]:
    """Median peak RSS of each probe over `memory_rounds` rounds of fresh processes.

    One round runs every probe once. The AdamW step's peak moves by up to 300 MiB between identical
    runs (how much freed activation memory glibc keeps), so one round can land at either end; the
    median is the figure, and the per-round range of the ratio is printed next to it.
    """
    rounds: dict[str, list[int]] = {}
    for _ in range(settings.memory_rounds):
        for kind in PROBES:
            for figure, peak in _probe_peaks(kind, settings).items():
                rounds.setdefault(figure, []).append(peak)
    peaks = {figure: statistics.median(values) for figure, values in rounds.items()}
    per_round = [es / backprop for es, backprop in zip(rounds["es"], rounds["backprop"])]
    above_runtime = {figure: peaks[figure] - peaks["runtime"] for figure in ("es", "backprop")}
    return {
        "memory_rounds": settings.memory_rounds,
        "peak_rss_runtime_mib": peaks["runtime"] / 2**20,
        "peak_rss_inference_mib": peaks["inference"] / 2**20,
        "peak_rss_es_mib": peaks["es"] / 2**20,
        "peak_rss_backprop_mib": peaks["backprop"] / 2**20,
        "peak_rss_backprop_min_mib": min(rounds["backprop"]) / 2**20,
        "peak_rss_backprop_max_mib": max(rounds["backprop"]) / 2**20,
        "peak_rss_backprop_first_step_mib": peaks["backprop_first_step"] / 2**20,
        "mem_es_over_inference": peaks["es"] / peaks["inference"],
        "mem_es_over_backprop": peaks["es"] / peaks["backprop"],
        "mem_es_over_backprop_round_min": min(per_round),
        "mem_es_over_backprop_round_max": max(per_round),
        "mem_es_over_backprop_first_step": peaks["es"] / peaks["backprop_first_step"],
        "mem_es_over_backprop_above_runtime": above_runtime["es"] / above_runtime["backprop"],
    }


def _probe_peaks(kind: str, settings: Settings) -> dict[str, int]:
    command = [sys.executable, __file__, "--probe", kind] + (["--quick"] if settings.quick else [])
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"memory probe {kind} failed: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- 5. inplace drift ------------------------------------------------------------------------------


def measure_drift(model: torch.nn.Module, settings: Settings) -> dict[str, float]:
    host = TorchWeightsHost(model, scope=DRIFT_SCOPE, restore="inplace")
    params = dict(canonical_parameters(model))
    start = {name: params[name].detach().clone() for name in host.parameter_names}

    def rms_change() -> float:
        squares = sum(float((params[n].detach() - start[n]).double().square().sum()) for n in start)
        return (squares / sum(t.numel() for t in start.values())) ** 0.5

    for cycle in range(settings.drift_cycles):
        host.perturb(Perturbation(seed=10_000 + cycle, sigma=SIGMA))
        host.restore()
    drift = rms_change()
    with torch.no_grad():
        for name, tensor in start.items():
            params[name].copy_(tensor)
    engine = ESEngine(ESConfig(population_size=8, sigma=SIGMA, alpha=ALPHA), host)
    members = engine.ask()
    engine.tell(members, list(np.random.default_rng(0).normal(size=len(members))))
    update_rms = rms_change()
    return {"drift_rms": drift, "update_rms": update_rms, "drift_inplace_rms": drift / update_rms}


# --- report ----------------------------------------------------------------------------------------


SECTIONS = ("perturb", "generation", "drift", "memory")


def run_all(settings: Settings, sections: tuple[str, ...] = SECTIONS) -> Iterator[dict[str, float]]:
    """Each section's figures as soon as they are measured (the full run takes many minutes)."""
    yield {
        "new_tokens": settings.new_tokens,
        "population": settings.population,
        "torch_threads": torch.get_num_threads(),
    }
    if set(sections) & {"perturb", "generation", "drift"}:
        model, tokenizer = load_causal_lm()
        if "perturb" in sections:
            yield measure_perturb(model, settings)
        if "generation" in sections:
            yield measure_generation(model, tokenizer, settings)
        if "drift" in sections:
            yield measure_drift(model, settings)
    if "memory" in sections:
        yield measure_memory(settings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 members, 4 tokens, 50 drift cycles")
    parser.add_argument("--only", choices=SECTIONS, help="measure one section (e.g. memory: the four RSS probes)")
    parser.add_argument("--probe", choices=PROBES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    settings = Settings.of(args.quick)
    if args.probe:
        print(json.dumps(run_probe(args.probe, settings)))
        return 0
    results: dict[str, float] = {}
    for section in run_all(settings, (args.only,) if args.only else SECTIONS):
        results.update(section)
        if not args.json:
            print("\n".join(target_line(name, value, TARGETS) for name, value in section.items()), flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
