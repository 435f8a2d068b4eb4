"""The agent environments: multi-turn, offline, deterministic under a seed. `make_env(name, H)` builds one.

See `tasks.agents.base` for the protocol, `tasks.agents.rollout` for batched episodes and
`tasks.agents.gym` for adapters of environments users already have.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from coevo.plugins import PluginError, Registry, normalised
from tasks.agents.base import AgentEnv, HorizonError, Outcome, TextEnv, check_horizon
from tasks.agents.plugin import PluginEnv, plugin_env_class
from tasks.agents.rollout import Episode, EpisodeTurn, Prompt, llm_policy, rollout

ENVIRONMENTS = Registry("coevo.envs", "environment")
"""Any class: one that is not an `AgentEnv` is wrapped as a Gymnasium-style environment."""

ENV_NAMES: tuple[str, ...] = ENVIRONMENTS.names()
"""The registered environments' names (coevo's own and those of installed packages)."""


class UnknownEnvError(PluginError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@cache
def env_class(name: str) -> type[AgentEnv[Any]] | type[PluginEnv]:
    """The class registered under `name`, or named by a ``file.py:Class`` / ``module:Class`` spec (a
    Gymnasium-style class that is not an `AgentEnv` comes wrapped); UnknownEnvError (one line) otherwise."""
    try:
        cls = ENVIRONMENTS.get(name)
        return cls if issubclass(cls, AgentEnv) else plugin_env_class(cls, normalised(name))
    except (PluginError, ValueError) as exc:
        raise UnknownEnvError(str(exc)) from None


def make_env(name: str, horizon: int | None = None) -> AgentEnv[Any] | PluginEnv:
    """A fresh environment; H defaults to the shortest. Raises UnknownEnvError or HorizonError."""
    cls = env_class(name)
    return cls(cls.horizons[0] if horizon is None else horizon)


def labelled(name: str, horizon: int) -> str:
    """`name-H<horizon>` as runs, workloads and episodes are named; `name` alone for an environment
    without a horizon knob, whose one H tells nothing."""
    return f"{name}-H{horizon}" if env_class(name).horizon_knob else name


def instances_of(name: str) -> str:
    """The environment whose instances `name` shares (a dense variant plays the same puzzles)."""
    return env_class(name).shares_instances_with or name


__all__ = [
    "ENV_NAMES",
    "AgentEnv",
    "Episode",
    "EpisodeTurn",
    "HorizonError",
    "Outcome",
    "Prompt",
    "TextEnv",
    "UnknownEnvError",
    "check_horizon",
    "env_class",
    "instances_of",
    "labelled",
    "llm_policy",
    "make_env",
    "rollout",
]
