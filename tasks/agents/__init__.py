"""The agent environments: multi-turn, offline, deterministic under a seed. `make_env(name, H)` builds one.

See `tasks.agents.base` for the protocol, `tasks.agents.rollout` for batched episodes and
`tasks.agents.gym` for adapters of environments users already have.
"""

from __future__ import annotations

from tasks.agents.base import AgentEnv, HorizonError, Outcome, TextEnv, check_horizon
from tasks.agents.gridnav import GridNav
from tasks.agents.rollout import Episode, Prompt, Turn, llm_policy, rollout
from tasks.agents.sudoku import Sudoku, Sudoku4, Sudoku4Dense, SudokuDense

ENVS: dict[str, type[AgentEnv]] = {cls.name: cls for cls in (Sudoku, SudokuDense, Sudoku4, Sudoku4Dense, GridNav)}
ENV_NAMES: tuple[str, ...] = tuple(ENVS)


class UnknownEnvError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def env_class(name: str) -> type[AgentEnv]:
    """The class registered under `name`; UnknownEnvError (one line) on a typo."""
    if name not in ENVS:
        raise UnknownEnvError(f"unknown environment {name!r}; known environments: {', '.join(ENV_NAMES)}")
    return ENVS[name]


def make_env(name: str, horizon: int | None = None) -> AgentEnv:
    """A fresh environment; H defaults to the shortest horizon. Raises UnknownEnvError or HorizonError."""
    cls = env_class(name)
    return cls(cls.horizons[0] if horizon is None else horizon)


def instances_of(name: str) -> str:
    """The environment whose instances `name` shares (a dense variant plays the same puzzles)."""
    return env_class(name).shares_instances_with or name


__all__ = [
    "ENVS",
    "ENV_NAMES",
    "AgentEnv",
    "Episode",
    "HorizonError",
    "Outcome",
    "Prompt",
    "TextEnv",
    "Turn",
    "UnknownEnvError",
    "check_horizon",
    "env_class",
    "instances_of",
    "llm_policy",
    "make_env",
    "rollout",
]
