"""A user's own text environment, given the shape of coevo's: name, horizons, turn budget, splits.

A plugin environment is any class whose instances have Gymnasium-style ``reset(seed)`` and
``step(action)`` over text. It may declare, as class attributes, what coevo's own environments
declare (all optional):

* ``name``, ``description``, ``action_format``: what listings and prompts show;
* ``horizons``: the values of its horizon knob, smallest first; then ``__init__`` takes the horizon;
* ``max_turns``: the turn budget of one episode (default `DEFAULT_MAX_TURNS`);
* ``action_stop``, ``max_action_tokens``: where the policy's answer ends, and the most tokens it may
  take (default: no stop, the run's ``llm.max_new_tokens``);
* ``splits``: ``{"search": [seeds], "val": [...], "test": [...]}`` (default: coevo's split seeds).

`plugin_env_class` wraps such a class into a class that behaves like an `AgentEnv` subclass to the rest of
coevo, so nothing outside this module branches on where an environment came from.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, ClassVar

from tasks.agents.base import check_horizon
from tasks.agents.gym import GymTextEnv

DEFAULT_MAX_TURNS = 32
NO_HORIZON = 1
"""The one H of an environment without a horizon knob (never shown: see `horizon_knob`)."""


class PluginEnv(GymTextEnv):
    """Base of the generated wrappers; `user_class` is the class a `plugin_env_class` call was given."""

    user_class: ClassVar[type]
    name: ClassVar[str]
    description: ClassVar[str]
    horizons: ClassVar[tuple[int, ...]]
    horizon_knob: ClassVar[bool]
    horizon_meaning: ClassVar[str]
    action_format: ClassVar[str]
    action_stop: ClassVar[tuple[str, ...]]
    max_action_tokens: ClassVar[int | None]
    splits: ClassVar[dict[str, list[int]] | None]
    shares_instances_with: ClassVar[str | None] = None

    def __init__(self, horizon: int) -> None:
        cls = type(self)
        self.horizon = check_horizon(cls, horizon)  # type: ignore[arg-type]
        super().__init__(cls.user_class(horizon) if cls.horizon_knob else cls.user_class())
        self.name = cls.name
        self._first = ""

    @property
    def max_turns(self) -> int:
        return int(getattr(self.env, "max_turns", DEFAULT_MAX_TURNS))

    def reset(self, seed: int) -> str:
        self._first = super().reset(seed)
        return self._first

    def instance(self) -> dict[str, Any]:
        """What the split hash covers: the environment's own ``instance()`` if it has one, else the
        first observation of the episode."""
        own = getattr(self.env, "instance", None)
        return json.loads(json.dumps(own(), default=str)) if callable(own) else {"observation": self._first}


def plugin_env_class(user_class: type, spec: str) -> type[PluginEnv]:
    """A `PluginEnv` subclass over `user_class`, registered under `spec`; ValueError (one line) on a
    class that lacks ``reset`` or ``step``."""
    missing = [method for method in ("reset", "step") if not callable(getattr(user_class, method, None))]
    if missing:
        raise ValueError(f"environment {spec!r}: {user_class.__name__} has no {' or '.join(missing)} method")
    horizons = tuple(getattr(user_class, "horizons", (NO_HORIZON,)))
    if not horizons or not all(isinstance(h, int) for h in horizons):
        raise ValueError(f"environment {spec!r}: horizons must be a non-empty tuple of integers")
    splits = getattr(user_class, "splits", None)
    attributes = {
        "user_class": user_class,
        "name": spec,
        "description": getattr(user_class, "description", None) or _first_line(user_class),
        "horizons": horizons,
        "horizon_knob": hasattr(user_class, "horizons"),
        "horizon_meaning": getattr(user_class, "horizon_meaning", "the environment's horizon knob")
        if hasattr(user_class, "horizons")
        else "no horizon knob",
        "action_format": getattr(user_class, "action_format", "one line of text"),
        "action_stop": tuple(getattr(user_class, "action_stop", ())),
        "max_action_tokens": getattr(user_class, "max_action_tokens", None),
        "splits": {split: [int(seed) for seed in seeds] for split, seeds in splits.items()} if splits else None,
    }
    return type(f"Plugin{user_class.__name__}", (PluginEnv,), attributes)


def _first_line(cls: type) -> str:
    doc = inspect.getdoc(cls) or cls.__name__
    return doc.splitlines()[0]
