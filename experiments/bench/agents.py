"""Agent-workload ES speed on the embedded SmolLM2-135M (fp32, this CPU): issue 12's figures.

Usage: python experiments/bench/agents.py [--json] [--quick]

Figures (targets in TARGETS), all on the same gridnav episodes (N members x E search seeds):
- episode_throughput_ratio: episodes/s of one low-rank ES generation (ask, every turn of every
  member's episodes decoded in one batch with row k under its member's perturbation, tell) over
  episodes/s of plain batched inference on the same N x E episodes (one rollout, live weights).
- es_generation_over_inference: seconds of one full-rank ES generation (ask, each member's E episodes
  under `perturbed()` in turn, tell) over seconds of the same N rollouts of E episodes, unperturbed.
Both sides of a ratio alternate in short rounds (`rounds.py`); a figure is the median per-round ratio,
with the range as `<figure>_min` and `<figure>_max`. Sampling is the agent's (seeded per episode and
turn), capped at `max_new_tokens` per turn, so both sides decode the same prompts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from coevo.agents import AgentWorkload
from coevo.candidate import WeightsRef
from coevo.es.engine import ESConfig, ESEngine
from coevo.llm.base import AGENT_SAMPLING
from coevo.llm.hf import HFBackend
from coevo.workload import Member
from rounds import alternate, ratio_summary, target_line
from tasks.agents import llm_policy, rollout
from tasks.agents.splits import split_seeds

TARGETS: dict[str, tuple[str, float]] = {
    "episode_throughput_ratio": (">=", 0.8),
    "es_generation_over_inference": ("<=", 1.10),
}
ENV, HORIZON = "gridnav", 2
SIGMA, ALPHA = 1e-3, 5e-4  # the reference's sigma_0 and step size (REFERENCES section 1)


@dataclass(frozen=True)
class Settings:
    """Run size: --quick only checks that everything runs."""

    members: int
    episodes: int
    rounds: int
    max_new_tokens: int

    @classmethod
    def of(cls, quick: bool) -> Settings:
        if quick:
            return cls(members=2, episodes=2, rounds=1, max_new_tokens=8)
        return cls(members=4, episodes=4, rounds=3, max_new_tokens=24)


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


class Generation:
    """One ES generation on the agent workload: ask N members, play their episodes, tell the rewards."""

    def __init__(self, llm: HFBackend, rank: int, settings: Settings) -> None:
        scope = "all_linear" if rank else "full"
        host = llm.weights_host(scope, rank)
        self.engine = ESEngine(ESConfig(population_size=settings.members, sigma=SIGMA, alpha=ALPHA), host)
        sampling = replace(AGENT_SAMPLING, max_new_tokens=settings.max_new_tokens)
        seeds = tuple(split_seeds("search")[: settings.episodes])
        self.workload = AgentWorkload(llm, ENV, HORIZON, seeds, host=host, sampling=sampling)

    def __call__(self) -> None:
        members = self.engine.ask()
        refs = [WeightsRef.of("smollm2-135m", self.engine.step, p) for p in members]
        evaluations = self.workload.evaluate([Member("", ref) for ref in refs])
        self.engine.tell(members, [e.reward for e in evaluations])


def plain_rollouts(llm: HFBackend, settings: Settings, together: bool) -> Callable[[], None]:
    """The same N x E episodes on the live weights: one rollout of all of them, or N rollouts of E."""
    sampling = replace(AGENT_SAMPLING, max_new_tokens=settings.max_new_tokens)
    seeds = split_seeds("search")[: settings.episodes]
    policy = llm_policy(llm, sampling)

    def run() -> None:
        if together:
            rollout(ENV, seeds * settings.members, policy, horizon=HORIZON)
        else:
            for _ in range(settings.members):
                rollout(ENV, seeds, policy, horizon=HORIZON)

    return run


def measure(settings: Settings) -> dict[str, float]:
    llm = HFBackend.load("smollm2-135m", max_batch_size=settings.members * settings.episodes)
    episodes = settings.members * settings.episodes
    lowrank, fullrank = Generation(llm, 1, settings), Generation(llm, 0, settings)
    plain_together, plain_in_turn = plain_rollouts(llm, settings, True), plain_rollouts(llm, settings, False)
    plain_together()  # warm-up
    seconds = alternate(
        {
            "plain_batched": lambda: timed(plain_together),
            "es_lowrank": lambda: timed(lowrank),
            "plain_per_member": lambda: timed(plain_in_turn),
            "es_fullrank": lambda: timed(fullrank),
        },
        settings.rounds,
    )
    return {
        "members": settings.members,
        "episodes_per_member": settings.episodes,
        "plain_batched_episodes_per_s": episodes / min(seconds["plain_batched"]),
        "es_lowrank_episodes_per_s": episodes / min(seconds["es_lowrank"]),
        **ratio_summary("episode_throughput_ratio", seconds["plain_batched"], seconds["es_lowrank"]),
        **ratio_summary("es_generation_over_inference", seconds["es_fullrank"], seconds["plain_per_member"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 members x 2 episodes, one round")
    args = parser.parse_args(argv)
    results = measure(Settings.of(args.quick))
    print(json.dumps(results) if args.json else "\n".join(target_line(k, v, TARGETS) for k, v in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
