"""The text-environment protocol of the agent workload, and the base class of coevo's own environments.

Any object with Gymnasium-style ``reset(seed) -> observation`` and ``step(action_text) -> (observation,
reward, terminated, truncated, info)`` is an environment (`TextEnv`). coevo's own environments add what
an evolutionary loop needs on top (`AgentEnv`): a horizon knob H with a validated range, a turn budget
that grows with H, and a one-line action format parsed leniently, where an action that cannot be
parsed or applied is refused with feedback and costs a turn. Whatever the model writes, an episode
ends within ``max_turns`` steps with a reward and a reason; ``step`` never raises on text.

The observation of an `AgentEnv` is the whole prompt, rebuilt every turn (rules, turn count, last
feedback, the state), so a policy needs no chat history.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
"""(observation, reward, terminated, truncated, info), as Gymnasium returns it."""

MAX_ACTION_CHARS = 2000
"""Only this much of an action text is parsed: endless model output costs no more than a short one."""


@runtime_checkable
class TextEnv(Protocol):
    """A multi-turn text environment in Gymnasium's shape."""

    def reset(self, seed: int) -> str:
        """Start the episode of instance `seed`; returns the first observation."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply one action text."""
        ...


class HorizonError(ValueError):
    """H is outside the environment's range (one line, for the CLI)."""


@dataclass(frozen=True)
class Outcome:
    """How an episode ended: its terminal reward, whether it counts as solved, and why."""

    reward: float
    success: bool
    reason: str


ActionT = TypeVar("ActionT")


class AgentEnv(abc.ABC, Generic[ActionT]):
    """Base of coevo's environments: terminal-only reward, a budget of ``turns_per_horizon * H`` turns.

    Subclasses fill in the class attributes and the hooks below; this class owns the turn loop, so
    every environment refuses bad actions, counts turns and reports outcomes the same way.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    horizons: ClassVar[tuple[int, ...]]
    """The values H may take, smallest (easiest) first."""
    horizon_knob: ClassVar[bool] = True
    """Whether H is the environment's own knob; False for a plugin without `horizons`, whose one H is
    never shown."""
    horizon_meaning: ClassVar[str]
    """What H counts, for `coevo tasks list` (e.g. "blank cells")."""
    action_format: ClassVar[str]
    turns_per_horizon: ClassVar[int] = 3
    action_stop: ClassVar[tuple[str, ...]] = ("\n",)
    """Where a policy's answer ends (`rollout.turn_request` stops decoding there): actions are one line."""
    max_action_tokens: ClassVar[int] = 32
    """Tokens a policy may spend on one action: one line of the action format with room to spare."""
    shares_instances_with: ClassVar[str | None] = None
    """Another environment whose instances (and manifest) this one plays, e.g. a reward variant."""

    def __init__(self, horizon: int) -> None:
        self.horizon = check_horizon(type(self), horizon)
        self._turn = 0
        self._invalid = 0
        self._feedback = "none yet"
        self._outcome: Outcome | None = None

    @property
    def max_turns(self) -> int:
        return self.turns_per_horizon * self.horizon

    # --- the protocol ---------------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        self._turn, self._invalid, self._feedback, self._outcome = 0, 0, "none yet", None
        self._setup(np.random.default_rng(seed))
        return self.prompt()

    def step(self, action: str) -> StepResult:
        """One turn; anything that is not text counts as an unreadable action."""
        if self._outcome is not None:
            raise RuntimeError("step() after the episode ended: call reset() first")
        self._turn += 1
        parsed = self._parse(action[:MAX_ACTION_CHARS]) if isinstance(action, str) else None
        if parsed is None:
            valid, feedback = False, f"invalid action: could not read it; the format is `{self.action_format}`"
        else:
            valid, feedback = self._apply(parsed)
            if not valid:
                feedback = f"invalid action: {feedback}"
        self._invalid += not valid
        self._feedback = feedback
        outcome = self._finished()
        truncated = outcome is None and self._turn >= self.max_turns
        if truncated:
            outcome = self._out_of_turns()
        info: dict[str, Any] = {"turn": self._turn, "valid": valid, "feedback": feedback}
        if outcome is not None:
            self._outcome = outcome
            info |= {"success": outcome.success, "reason": outcome.reason, "invalid_actions": self._invalid}
        reward = outcome.reward if outcome is not None else 0.0
        return self.prompt(), reward, outcome is not None and not truncated, truncated, info

    def prompt(self) -> str:
        """Rules, turn count, last feedback and the state: everything the policy needs, every turn."""
        turn = min(self._turn + 1, self.max_turns)
        return (
            f"{self._rules()}\n\nTurn {turn} of {self.max_turns}. Last feedback: {self._feedback}\n\n"
            f"{self._render()}\n\nReply with one line: {self.action_format}\n"
        )

    def _out_of_turns(self) -> Outcome:
        reward, detail = self._partial()
        everything_invalid = self._invalid == self._turn
        why = "every action was invalid" if everything_invalid else detail
        return Outcome(reward, False, f"out of turns ({self.max_turns}): {why}")

    # --- hooks ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def _setup(self, rng: np.random.Generator) -> None:
        """Draw the instance from `rng` (the seed's own generator) and set the start state."""

    @abc.abstractmethod
    def instance(self) -> dict[str, Any]:
        """The current instance as plain JSON data: what the split manifests hash."""

    @abc.abstractmethod
    def _parse(self, text: str) -> ActionT | None:
        """The action in `text`, read leniently, or None when none can be found."""

    @abc.abstractmethod
    def _apply(self, action: ActionT) -> tuple[bool, str]:
        """Apply a parsed action: (valid, feedback). An invalid one must leave the state unchanged."""

    @abc.abstractmethod
    def _finished(self) -> Outcome | None:
        """The outcome if the episode has ended on its own (solved, or no move left), else None."""

    @abc.abstractmethod
    def _partial(self) -> tuple[float, str]:
        """(reward, description) of an unfinished state, used when the turns run out."""

    @abc.abstractmethod
    def _rules(self) -> str: ...

    @abc.abstractmethod
    def _render(self) -> str: ...


def check_horizon(env_class: type[AgentEnv[Any]], horizon: int) -> int:
    """H itself, or HorizonError naming the allowed values."""
    if horizon not in env_class.horizons:
        allowed = ", ".join(map(str, env_class.horizons))
        raise HorizonError(f"horizon {horizon} is out of range for {env_class.name}; choose one of: {allowed}")
    return horizon
