"""Adapters: environments users already have run through `rollout` unchanged.

`GymTextEnv` takes any Gymnasium-style object (``reset(seed=...)`` returning an observation or
``(observation, info)``; ``step(action)`` returning the 5-tuple, or the old 4-tuple). `TextArenaEnv`
drives a TextArena single-player game (the optional extra ``coevo[textarena]``; its word games
call nltk downloads and fail offline, the puzzle games run). Third-party code may raise on strange
text; an adapter turns that into the end of the episode with reward 0 and the error as its reason,
so a rollout never crashes on model output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasks.agents.base import StepResult


class GymTextEnv:
    """A `TextEnv` over a Gymnasium-style object; `observe` and `act` translate non-text spaces."""

    def __init__(
        self,
        env: Any,
        observe: Callable[[Any], str] = str,
        act: Callable[[str], Any] = lambda text: text,
    ) -> None:
        self.env = env
        self.observe = observe
        self.act = act
        self.name = getattr(env, "name", None) or getattr(getattr(env, "spec", None), "id", None) or type(env).__name__
        self._last = ""

    def reset(self, seed: int) -> str:
        out = self.env.reset(seed=seed)
        self._last = self.observe(out[0] if isinstance(out, tuple) else out)
        return self._last

    def step(self, action: str) -> StepResult:
        try:
            out = self.env.step(self.act(action))
        except Exception as exc:  # third-party code meeting model output: end the episode, keep the reason
            return self._last, 0.0, True, False, {"success": False, "reason": f"environment raised {exc!r}"}
        if len(out) == 4:  # old gym: (observation, reward, done, info)
            observation, reward, done, info = out
            terminated, truncated = bool(done), False
        else:
            observation, reward, terminated, truncated, info = out
        self._last = self.observe(observation)
        return self._last, float(reward), bool(terminated), bool(truncated), dict(info or {})


class TextArenaEnv:
    """A `TextEnv` over a TextArena single-player game (``ta.make(env_id)``); success = reward >= 1."""

    def __init__(self, env_id: str) -> None:
        import textarena as ta  # optional dependency

        self.name = env_id
        self.env = ta.make(env_id)

    def reset(self, seed: int) -> str:
        self.env.reset(num_players=1, seed=seed)
        return self._observation()

    def step(self, action: str) -> StepResult:
        try:
            done, _ = self.env.step(action)
        except Exception as exc:  # as in GymTextEnv
            return "", 0.0, True, False, {"success": False, "reason": f"environment raised {exc!r}"}
        if not done:
            return self._observation(), 0.0, False, False, {}
        rewards, game_info = self.env.close()
        reward = float(rewards[0])
        reason = str(game_info.get(0, {}).get("reason", "game over"))
        return "", reward, True, False, {"success": reward >= 1.0, "reason": reason}

    def _observation(self) -> str:
        _, observation = self.env.get_observation()
        return str(observation)
