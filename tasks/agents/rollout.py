"""Batched multi-turn rollouts: every live episode's turn goes to the policy in one call.

A policy is ``Callable[[list[str]], list[str]]``: prompts in, one action text per prompt out (or
objects with ``.text`` and ``.completion_tokens``, such as `coevo.llm.base.Completion`, so token counts
reach the trajectory). The prompts are `Prompt` strings that also carry the episode's instance seed
and turn, so a sampling policy can bind its randomness to the episode rather than to the batch it
happens to share (`llm_policy` does): an episode then replays the same wherever and with whomever it
runs. They also carry how their environment's actions end (`action_stop`, `max_action_tokens`, where the
environment declares them), so a turn stops decoding at the end of its action.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from tasks.agents.base import MAX_ACTION_CHARS, TextEnv

if TYPE_CHECKING:
    from coevo.llm.base import SamplingParams


class Prompt(str):
    """A prompt that knows which episode and turn it belongs to (still a plain `str` to any policy)."""

    seed: int
    turn: int
    episode: int
    """The episode's index among the rollout's seeds, so a policy can tell apart two episodes of one seed."""
    stop: tuple[str, ...]
    """Where the environment's action ends ("\n" for a one-line action); () where it does not say."""
    max_tokens: int | None
    """The environment's cap on the tokens of one action; None where it has none."""

    def __new__(
        cls,
        text: str,
        seed: int,
        turn: int,
        episode: int = 0,
        stop: tuple[str, ...] = (),
        max_tokens: int | None = None,
    ) -> Prompt:
        prompt = super().__new__(cls, text)
        prompt.seed, prompt.turn, prompt.episode = seed, turn, episode
        prompt.stop, prompt.max_tokens = tuple(stop), max_tokens
        return prompt

    def with_text(self, text: str) -> Prompt:
        """Another text for the same episode and turn (a member's instruction put before it)."""
        return Prompt(text, self.seed, self.turn, self.episode, self.stop, self.max_tokens)

    def __reduce__(self) -> tuple[type[Prompt], tuple[str, int, int, int, tuple[str, ...], int | None]]:
        # pickles across processes (a Ray worker)
        return Prompt, (str(self), self.seed, self.turn, self.episode, self.stop, self.max_tokens)


class Generated(Protocol):
    text: str
    completion_tokens: int


Policy = Callable[[list[str]], Sequence["str | Generated"]]


@dataclass(frozen=True)
class EpisodeTurn:
    """One turn of an `Episode`: the whole prompt the policy was given, its answer, the reward, and the
    environment's feedback."""

    prompt: str
    action: str
    """The action text as the policy wrote it, cut at `MAX_ACTION_CHARS`."""
    reward: float
    tokens: int | None
    """Generated tokens, when the policy reports them."""
    feedback: str = ""


@dataclass(frozen=True)
class Episode:
    """One finished episode: its turns, total reward, whether it counts as solved, and why it ended."""

    env: str
    horizon: int | None
    """H of a registered environment; None for an adapted one."""
    seed: int
    turns: tuple[EpisodeTurn, ...]
    reward: float
    success: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "horizon": self.horizon,
            "seed": self.seed,
            "reward": self.reward,
            "success": self.success,
            "reason": self.reason,
            "turns": [vars(turn) for turn in self.turns],
        }


def rollout(
    env: str | Callable[[], Any],
    seeds: Sequence[int],
    policy: Policy,
    *,
    horizon: int | None = None,
    max_turns: int | None = None,
) -> list[Episode]:
    """Run one episode per instance seed to its end, batching the live episodes' turns.

    `env` is a registered name (then `horizon` picks H, default the shortest) or a factory of
    Gymnasium-style objects, which run through `GymTextEnv`. `max_turns` caps every episode (default:
    the environment's own budget; required for an environment that has none), so no policy and no
    environment can make a rollout hang.
    """
    from tasks.agents import make_env

    if isinstance(env, str):
        name = env
        envs: list[TextEnv] = [make_env(env, horizon) for _ in seeds]
    else:
        envs = [_as_text_env(env()) for _ in seeds]
        name = getattr(envs[0], "name", type(envs[0]).__name__) if envs else "env"
    caps = [max_turns or getattr(e, "max_turns", None) for e in envs]
    if None in caps:
        raise ValueError("this environment has no turn budget of its own: pass max_turns")
    action_ends = [(tuple(getattr(e, "action_stop", ())), getattr(e, "max_action_tokens", None)) for e in envs]
    observations = [e.reset(s) for e, s in zip(envs, seeds, strict=True)]
    turns: list[list[EpisodeTurn]] = [[] for _ in seeds]
    totals = [0.0] * len(seeds)
    results: list[Episode | None] = [None] * len(seeds)
    live = list(range(len(seeds)))
    while live:
        prompts = [Prompt(observations[i], seeds[i], len(turns[i]) + 1, i, *action_ends[i]) for i in live]
        actions = list(policy(list(prompts)))
        if len(actions) != len(live):
            raise ValueError(f"the policy returned {len(actions)} actions for {len(live)} prompts")
        still_live = []
        for i, prompt, action in zip(live, prompts, actions, strict=True):
            text, tokens = _unpack(action)
            observation, reward, terminated, truncated, info = envs[i].step(text)
            totals[i] += float(reward)
            turns[i].append(EpisodeTurn(str(prompt), text, float(reward), tokens, str(info.get("feedback", ""))))
            observations[i] = observation
            capped = len(turns[i]) >= caps[i]
            if terminated or truncated or capped:
                reason = info.get("reason") or (
                    "ended" if terminated or truncated else f"stopped after {caps[i]} turns"
                )
                success = bool(info.get("success", totals[i] > 0 and (terminated or truncated)))
                results[i] = Episode(
                    name, getattr(envs[i], "horizon", None), seeds[i], tuple(turns[i]), totals[i], success, str(reason)
                )
            else:
                still_live.append(i)
        live = still_live
    return [episode for episode in results if episode is not None]


def _as_text_env(obj: Any) -> TextEnv:
    """coevo's own environments and adapters as they are; anything else through `GymTextEnv`."""
    from tasks.agents.base import AgentEnv
    from tasks.agents.gym import GymTextEnv, TextArenaEnv

    return obj if isinstance(obj, (AgentEnv, GymTextEnv, TextArenaEnv)) else GymTextEnv(obj)


def _unpack(action: object) -> tuple[str, int | None]:
    """(text cut at MAX_ACTION_CHARS, token count or None); anything else than text becomes ''."""
    if isinstance(action, str):
        return action[:MAX_ACTION_CHARS], None
    text = getattr(action, "text", "")
    tokens = getattr(action, "completion_tokens", None)
    return (text if isinstance(text, str) else "")[:MAX_ACTION_CHARS], tokens


class PerRequestLLM(Protocol):
    """A backend that takes a sampling setting (seed included) per request, as `HFBackend` does."""

    def generate_each(self, items: Sequence[tuple[Sequence[dict[str, str]], SamplingParams]]) -> list[Generated]: ...


def episode_seed(seed: int, prompt: Prompt) -> int:
    """The sampling seed of one turn: (run seed, instance seed, turn), never the batch position."""
    digest = hashlib.blake2b(f"{seed}:{prompt.seed}:{prompt.turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def llm_policy(llm: PerRequestLLM, sampling: SamplingParams, seed: int = 0) -> Policy:
    """A policy that sends each prompt as one user message, sampled from its episode's own seed.

    `sampling`'s seed is replaced per turn by `episode_seed`, so batching never changes an episode.
    """

    def policy(prompts: list[str]) -> list[Generated]:
        return llm.generate_each([turn_request(_as_prompt(p), sampling, seed) for p in prompts])

    return policy


def turn_request(prompt: Prompt, sampling: SamplingParams, seed: int) -> tuple[list[dict[str, str]], SamplingParams]:
    """One turn as a `generate_each` item: the prompt as the user message, sampled from its episode's seed,
    ending where the environment's action ends and within its token cap (and `sampling`'s)."""
    cap = sampling.max_new_tokens if prompt.max_tokens is None else min(sampling.max_new_tokens, prompt.max_tokens)
    turn = replace(
        sampling,
        seed=episode_seed(seed, prompt),
        max_new_tokens=cap,
        stop=tuple(dict.fromkeys(sampling.stop + prompt.stop)),
    )
    return [{"role": "user", "content": str(prompt)}], turn


def _as_prompt(text: str) -> Prompt:
    if not isinstance(text, Prompt):
        raise TypeError("llm_policy binds seeds to episodes: call it through rollout(), which sends Prompts")
    return text
