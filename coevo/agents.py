"""The agent workload: a member is a prompt prefix plus weights, scored by the episodes it plays.

A member's perturbation covers its whole rollout: every turn of every episode is generated with that
member's weights in place (the host's `perturbed()` block is held for the member's whole batch of
episodes), so the reward credits the weights for the trajectory, not for one answer. The member's text
is an instruction prefix put before every observation, which makes the prompt side of a member as
evolvable as its weights. Sampling is seeded from (workload seed, member index, instance seed, turn),
never from a call counter, so an episode replays the same wherever and in whatever batch it runs.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace

from coevo.candidate import WeightsRef
from coevo.es.perturbation import Perturbation
from coevo.es.protocols import WeightsHost
from coevo.llm.base import AGENT_SAMPLING, SamplingParams
from coevo.workload import Evaluation, Member, Trajectory, Turn
from tasks.agents import Episode, Prompt, llm_policy, make_env, rollout
from tasks.agents.rollout import PerRequestLLM, Policy

FAILURE_REASONS_SHOWN = 3


@dataclass(frozen=True)
class AgentWorkload:
    """The `Workload` over one environment at one horizon and a fixed list of instance seeds."""

    llm: PerRequestLLM
    env: str
    horizon: int
    seeds: tuple[int, ...]
    split: str = "search"
    host: WeightsHost | None = None
    """Where a perturbed member's weights are put; None when every member runs the live weights."""
    sampling: SamplingParams = AGENT_SAMPLING
    seed: int = 0
    sense = "max"

    def __post_init__(self) -> None:
        make_env(self.env, self.horizon)  # an unknown name or H out of range fails here, in one line

    @property
    def name(self) -> str:
        return f"{self.env}-H{self.horizon}"

    def on(self, seeds: Iterable[int], split: str | None = None) -> AgentWorkload:
        """The same workload over other instances (a generation's batch, a held-out split)."""
        return replace(self, seeds=tuple(seeds), split=split or self.split)

    def episodes(self, members: Sequence[Member]) -> list[list[Episode]]:
        """Every member's episodes, one member after another, each under its own weights throughout."""
        return [self._play(index, member) for index, member in enumerate(members)]

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        """Per member: the episode rewards (success, or the dense reward of a *-dense env), feedback on failures."""
        evaluations = []
        for index, member in enumerate(members):
            started = time.perf_counter()
            played = self._play(index, member)
            evaluations.append(self._evaluation(played, traces, time.perf_counter() - started))
        return evaluations

    def remember(self, texts: Iterable[str]) -> None:
        """Episodes are not cached by text (the weights decide them), so there is nothing to recall."""

    def close(self) -> None:
        """Environments hold no workers."""

    def _play(self, index: int, member: Member) -> list[Episode]:
        policy = _prefixed(llm_policy(self.llm, self.sampling, member_seed(self.seed, index)), member.text)
        with self._weights_of(member.weights):
            return rollout(self.env, list(self.seeds), policy, horizon=self.horizon)

    def _weights_of(self, weights: WeightsRef | None):
        if weights is None or weights.seed is None:
            return nullcontext()
        if self.host is None:
            raise ValueError("a perturbed member needs the workload's weights host")
        return self.host.perturbed(Perturbation(weights.seed, weights.sigma, weights.sign))

    def _evaluation(self, played: list[Episode], traces: bool, seconds: float) -> Evaluation:
        rewards = tuple(episode.reward for episode in played)
        return Evaluation(
            sense=self.sense,
            split=self.split,
            per_instance=rewards,
            objective=sum(rewards) / len(rewards) if rewards else None,
            reason=None if rewards else "no episodes to play",
            feedback=failure_summary(played),
            trajectories=tuple(trajectory(e) for e in played) if traces else None,
            seconds=seconds,
        )


def member_seed(seed: int, index: int) -> int:
    """The sampling root of member `index`: its episodes replay the same in any batch, on any worker."""
    digest = hashlib.blake2b(f"{seed}:member:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _prefixed(policy: Policy, text: str) -> Policy:
    """`policy` with the member's text before every observation (episode seed and turn kept)."""
    if not text:
        return policy

    def with_prefix(prompts: list[str]) -> Sequence:
        return policy([Prompt(f"{text}\n\n{p}", p.seed, p.turn) for p in prompts])

    return with_prefix


def trajectory(episode: Episode) -> Trajectory:
    """An episode in the workload protocol's terms (the observation is the env's, without the prefix)."""
    turns = tuple(Turn(t.prompt, t.action, t.reward, t.tokens or 0) for t in episode.turns)
    return Trajectory(f"{episode.env}-H{episode.horizon}/{episode.seed}", turns, episode.reward)


def failure_summary(played: Sequence[Episode]) -> str:
    """What went wrong, in words a prompt operator can act on: the success count and the commonest failures."""
    failed = [e for e in played if not e.success]
    head = f"solved {len(played) - len(failed)} of {len(played)} episodes"
    if not failed:
        return head
    reasons = Counter(e.reason for e in failed).most_common(FAILURE_REASONS_SHOWN)
    lines = [f"{count}x {reason}" for reason, count in reasons]
    example = failed[0].turns[-1] if failed[0].turns else None
    if example is not None:
        lines.append(f"e.g. last action {example.action.strip()[:80]!r} got: {example.feedback}")
    return head + "; failures: " + "; ".join(lines)
