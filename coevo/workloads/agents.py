"""The agent workload: a member is a prompt prefix plus weights, scored by the episodes it plays.

A member's perturbation covers its whole rollout: every turn of every episode is generated under that
member's weights (full rank: the host's `perturbed()` block is held for the member's whole batch of
episodes; low rank: all members' episodes play together, each batch row under its member's
perturbation), so the reward credits the weights for the trajectory, not for one answer. The member's text
is an instruction prefix put before every observation, which makes the prompt side of a member as
evolvable as its weights. Sampling is seeded from (workload seed, member index, instance seed, turn),
never from a call counter, so an episode replays the same wherever and in whatever batch it runs
(in fp32; in bf16 a text can depend on its batch, see docs/llm.md).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from coevo.candidate import WeightsRef
from coevo.es.perturbation import Perturbation
from coevo.es.protocols import WeightsHost
from coevo.family import EPISODES
from coevo.llm.base import AGENT_SAMPLING, SamplingParams
from coevo.plugins import normalised
from coevo.workload import Evaluation, Member, Trajectory, Turn, WorkloadSettings
from coevo.workloads.episode_report import EPISODE_SECTIONS
from tasks.agents import (
    Episode,
    Prompt,
    UnknownEnvError,
    check_horizon,
    env_class,
    labelled,
    llm_policy,
    make_env,
    rollout,
)
from tasks.agents.rollout import PerRequestLLM, Policy, turn_request
from tasks.agents.splits import env_seeds, verify_split

if TYPE_CHECKING:
    from coevo.context import RunFacts
    from coevo.evaluate.evaluator import Evaluator

FAILURE_REASONS_SHOWN = 3


class AgentSettings(WorkloadSettings):
    """`[workload] kind = "agent"`: members are scored by the episodes they play in an environment."""

    env: str | None = Field(None, description="agent environment (coevo tasks list), required")
    horizon: int | None = Field(None, description="H of the environment (default: its shortest)")
    episodes: int = Field(32, ge=1, description="search-split episodes per member and generation")
    heldout: Literal["val", "test"] = Field("val", description="split scored before and after the run")
    heldout_episodes: int | None = Field(None, ge=1, description="only the first N held-out episodes")
    heldout_every: int | None = Field(
        None, ge=1, description="also measure held-out success every N generations (a learning curve); None: never"
    )
    temperature: float = Field(
        AGENT_SAMPLING.temperature, ge=0, description="the policy's sampling temperature per turn; 0: greedy decoding"
    )
    shared_sampling: bool = Field(
        False,
        description="every member samples the same random streams (common random numbers): members then differ"
        " by their weights or text alone, not by their luck",
    )

    @field_validator("env")
    @classmethod
    def _absolute_env_path(cls, value: str | None) -> str | None:
        return None if value is None else normalised(value)

    @model_validator(mode="after")
    def _known_env(self) -> AgentSettings:
        if self.env is None:
            raise ValueError("workload.kind = 'agent' needs workload.env")
        try:
            cls = env_class(self.env)
        except UnknownEnvError as exc:
            raise ValueError(str(exc)) from None
        check_horizon(cls, cls.horizons[0] if self.horizon is None else self.horizon)
        return self

    @property
    def agent_horizon(self) -> int:
        return self.horizon or env_class(self.env).horizons[0]

    @property
    def subject(self) -> str:
        return labelled(self.env, self.agent_horizon)


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
    window: int = 0
    """Episodes per generation, a window over `seeds` that moves on each generation; 0 plays all of them."""
    heldout: str = "val"
    """The split `heldout_episodes` plays: never searched, so it tells what the weights learned."""
    heldout_limit: int | None = None
    """Only the first N held-out episodes; None plays the whole split."""
    heldout_every: int | None = None
    """Also measure held-out success every N generations (the learning curve); None: before and after only."""
    shared_sampling: bool = False
    """Every member samples member 0's streams, so a reward difference is the weights', not the sampler's."""
    batched: bool = True
    """Play low-rank members together; False plays them one after another (what batching must equal)."""
    sense = "max"
    family = EPISODES
    settings_model = AgentSettings
    report_sections = EPISODE_SECTIONS

    @classmethod
    def build(
        cls,
        settings: AgentSettings,
        facts: RunFacts,
        llm: PerRequestLLM,
        host: WeightsHost | None = None,
        sandbox: Callable[[], Evaluator] | None = None,
    ) -> AgentWorkload:
        """The environment's search episodes in windows of `settings.episodes`, played by `llm` under
        `host`'s weights (no code is scored: `sandbox` is unused)."""
        return cls(
            llm,
            settings.env,
            settings.agent_horizon,
            tuple(env_seeds(settings.env, "search")),
            host=host,
            seed=facts.seed,
            window=settings.episodes,
            heldout=settings.heldout,
            heldout_limit=settings.heldout_episodes,
            heldout_every=settings.heldout_every,
            sampling=replace(AGENT_SAMPLING, temperature=settings.temperature),
            shared_sampling=settings.shared_sampling,
        )

    def __post_init__(self) -> None:
        make_env(self.env, self.horizon)  # an unknown name or H out of range fails here, in one line

    @property
    def name(self) -> str:
        return labelled(self.env, self.horizon)

    def on(self, seeds: Iterable[int], split: str | None = None) -> AgentWorkload:
        """The same workload over other instances (a generation's batch, a held-out split)."""
        return replace(self, seeds=tuple(seeds), split=split or self.split)

    def at_generation(self, generation: int) -> AgentWorkload:
        """Generation `generation`'s window of `window` seeds (generation 1 starts at the first), so a run
        shorter than the split still sees all of it."""
        if not self.window:
            return self
        start = (generation - 1) * self.window
        return self.on(self.seeds[(start + i) % len(self.seeds)] for i in range(self.window))

    def on_split(self, split: str, limit: int | None = None) -> AgentWorkload:
        """The same workload over a split's verified instances (its first `limit`; None: all of them)."""
        return self.on(verify_split(self.env, split, self.horizon)[:limit], split)

    def heldout_episodes(self, member: Member = Member("")) -> list[Episode]:
        """`member`'s text under the live weights on the held-out split's verified instances."""
        (played,) = self.on_split(self.heldout, self.heldout_limit).episodes([replace(member, weights=None)])
        return played

    def episodes(self, members: Sequence[Member]) -> list[list[Episode]]:
        """Every member's episodes, each under its own weights throughout: on a low-rank host all members
        together, a batch row per member; otherwise one member after another."""
        if self._batchable(members):
            return self._play_together(members)
        return [self._play(index, member) for index, member in enumerate(members)]

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        """Per member: the episode rewards (success, or the dense reward of a *-dense env), feedback on failures.

        Members played together share their wall time equally."""
        started = time.perf_counter()
        played = self.episodes(members)
        share = (time.perf_counter() - started) / max(len(members), 1)
        return [self._evaluation(episodes, traces, share) for episodes in played]

    def evaluate_at(self, index: int, member: Member, *, traces: bool = False) -> Evaluation:
        """Member `index` of a population played alone: what `evaluate` gives it in any batch, since its
        sampling is bound to its index, so a remote worker can play it."""
        started = time.perf_counter()
        played = self._play(index, member)
        return self._evaluation(played, traces, time.perf_counter() - started)

    def remember(self, texts: Iterable[str]) -> None:
        """Episodes are not cached by text (the weights decide them), so there is nothing to recall."""

    def close(self) -> None:
        """Environments hold no workers."""

    def _play(self, index: int, member: Member) -> list[Episode]:
        policy = _prefixed(llm_policy(self.llm, self.sampling, self._sampling_root(index)), member)
        with self._weights_of(member.weights):
            return rollout(self.env, list(self.seeds), policy, horizon=self.horizon)

    def _batchable(self, members: Sequence[Member]) -> bool:
        """A low-rank host runs members as batch rows; it needs every member perturbed (a row per member)."""
        return (
            self.batched
            and len(members) > 1
            and getattr(self.host, "population", None) is not None
            and all(m.weights is not None and m.weights.seed is not None for m in members)
        )

    def _play_together(self, members: Sequence[Member]) -> list[list[Episode]]:
        """One rollout of every member's episodes: each turn of all live episodes decodes in one batch
        (chunks of the backend's `max_batch_size`), row k under the perturbation of its episode's member.

        Prompt text and sampling seeds are those `_play` gives, so the episodes are the same."""
        count = len(self.seeds)
        perturbations = [Perturbation(m.weights.seed, m.weights.sigma, m.weights.sign) for m in members]
        roots = [self._sampling_root(index) for index in range(len(members))]
        chunk = getattr(self.llm, "max_batch_size", None)

        def policy(prompts: list[Prompt]) -> list:
            rows = [p.episode // count for p in prompts]
            items = [
                turn_request(_with_prefix(members[m], p), self.sampling, roots[m])
                for p, m in zip(prompts, rows, strict=True)
            ]
            step = chunk or len(items)
            completions = []
            for start in range(0, len(items), step):
                with self.host.population(perturbations, rows[start : start + step]):
                    completions += self.llm.generate_each(items[start : start + step])
            return completions

        played = rollout(self.env, list(self.seeds) * len(members), policy, horizon=self.horizon)
        return [played[i * count : (i + 1) * count] for i in range(len(members))]

    def _sampling_root(self, index: int) -> int:
        return member_sampling_seed(self.seed, 0 if self.shared_sampling else index)

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
            llm_calls=sum(len(e.turns) for e in played),
        )


def member_sampling_seed(seed: int, index: int) -> int:
    """The sampling root of member `index`: its episodes replay the same in any batch, on any worker."""
    digest = hashlib.blake2b(f"{seed}:member:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _prefixed(policy: Policy, member: Member) -> Policy:
    """`policy` with the member's text before every observation (episode seed and turn kept)."""
    if not member.text and member.retrieve is None:
        return policy

    def with_prefix(prompts: list[Prompt]) -> Sequence:
        return policy([_with_prefix(member, p) for p in prompts])

    return with_prefix


def _with_prefix(member: Member, prompt: Prompt) -> Prompt:
    text = member.text_for(str(prompt))
    return prompt.with_text(f"{text}\n\n{prompt}") if text else prompt


def trajectory(episode: Episode) -> Trajectory:
    """An episode in the workload protocol's terms (the observation is the env's, without the prefix)."""
    turns = tuple(Turn(t.prompt, t.action, t.reward, t.tokens or 0) for t in episode.turns)
    return Trajectory(f"{labelled(episode.env, episode.horizon)}/{episode.seed}", turns, episode.reward)


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
