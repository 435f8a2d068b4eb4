"""Memory of ES against TRL's GRPO on an agent workload (SmolLM2-135M, gridnav H=2): issue 12's figure.

Usage: python experiments/bench/agents_memory.py [--json] [--quick]

- mem_es_over_grpo: peak RSS of a fresh process that runs one ES generation (N members, each playing
  E episodes under its own in-place full-rank perturbation, then the update) over peak RSS of a fresh
  process that runs two TRL GRPO steps of E prompts x N completions, each rolled out to its episode. The
  second step is the steady one: AdamW makes its moment buffers at the end of the first, so only then
  does a step hold weights, reference model, moments, gradients and activations at once. Peak RSS is
  the process's high-water mark (VmHWM), so the figure is the steady step's peak.
Rounds alternate the two sides (`rounds.py`); the figure is the median of the per-round ratios, with
their range as `_min` and `_max`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rounds import alternate, ratio_summary

ENV, HORIZON = "gridnav", 2
TARGET = ("mem_es_over_grpo", "<=", 0.25)
SIDES = ("es", "grpo")


@dataclass(frozen=True)
class Settings:
    members: int
    """ES members per generation, and GRPO completions per prompt."""
    episodes: int
    """Episodes each member plays, and GRPO prompts per step."""
    rounds: int

    @classmethod
    def of(cls, quick: bool) -> Settings:
        return cls(members=2, episodes=2, rounds=1) if quick else cls(members=4, episodes=4, rounds=2)


def peak_rss_bytes() -> int:
    """This process's peak RSS (VmHWM). Not ru_maxrss: a child inherits its parent's through fork."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024


def run_side(side: str, settings: Settings) -> int:
    """Load the model, run the side's work, return this process's peak RSS."""
    from coevo.llm.hf import HFBackend
    from tasks.agents.splits import split_seeds

    llm = HFBackend.load("smollm2-135m", max_batch_size=settings.members * settings.episodes)
    seeds = split_seeds("search")[: settings.episodes]
    if side == "es":
        es_generation(llm, seeds, settings.members)
    else:
        grpo_steps(llm, seeds, settings.members)
    return peak_rss_bytes()


def es_generation(llm, seeds: list[int], members: int) -> None:
    from coevo.candidate import WeightsRef
    from coevo.es.engine import ESConfig, ESEngine
    from coevo.es.hosts import module_host
    from coevo.es.schedules import ScheduleConfig
    from coevo.workload import Member
    from coevo.workloads.agents import AgentWorkload

    host = module_host(llm.model, "full")
    config = ESConfig(
        population_size=members, sigma=ScheduleConfig(start=1e-3), alpha=ScheduleConfig(start=5e-4), total_steps=1
    )
    engine = ESEngine(config, host)
    perturbations = engine.ask()
    workload = AgentWorkload(llm, ENV, HORIZON, tuple(seeds), host=host)
    evaluations = workload.evaluate([Member("", WeightsRef.of(llm.name, 0, p)) for p in perturbations])
    engine.tell(perturbations, [e.reward for e in evaluations])


def grpo_steps(llm, seeds: list[int], members: int) -> None:
    from coevo.rl.grpo_stepper import GRPOSettings, GRPOStepper

    with tempfile.TemporaryDirectory() as scratch:
        stepper = GRPOStepper(llm, ENV, HORIZON, len(seeds), Path(scratch), GRPOSettings(num_generations=members))
        for _ in range(2):
            stepper.step(seeds)


def probe(side: str, settings: Settings) -> int:
    command = [sys.executable, __file__, "--probe", side, "--members", str(settings.members)]
    command += ["--episodes", str(settings.episodes)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"memory probe {side} failed: {result.stderr.strip().splitlines()[-1:]}")
    return int(result.stdout.strip().splitlines()[-1])


def measure(settings: Settings) -> dict[str, float]:
    peaks = alternate({side: (lambda s=side: probe(s, settings)) for side in SIDES}, settings.rounds)
    figures: dict[str, float] = {"members": settings.members, "episodes": settings.episodes, "rounds": settings.rounds}
    for side in SIDES:
        figures[f"peak_rss_{side}_mib"] = max(peaks[side]) / 2**20
    figures.update(ratio_summary("mem_es_over_grpo", peaks["es"], peaks["grpo"]))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 members x 2 episodes, one round")
    parser.add_argument("--probe", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--members", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--episodes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    settings = Settings.of(args.quick)
    if args.probe:
        print(run_side(args.probe, Settings(args.members, args.episodes, 1)))
        return 0
    try:
        import trl  # noqa: F401
    except ImportError:
        print("this benchmark needs the 'rl' extra: pip install 'coevo[rl]'", file=sys.stderr)
        return 2
    figures = measure(settings)
    if args.json:
        print(json.dumps(figures))
        return 0
    name, sense, target = TARGET
    for key, value in figures.items():
        suffix = f"  (target {sense} {target})" if key == name else ""
        print(f"{key}: {value:.4g}{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
