"""The heuristic-design tasks. ``get_task(name)`` is the one entry point.

A task is named by a registered name (the ``coevo.tasks`` entry-point group: coevo's nine register
there like any package's), or by ``path/to/problem.py:Class`` / ``package.module:Class``.
"""

from __future__ import annotations

from coevo.plugins import PluginError, load, registered
from tasks.base import SPLITS, InstanceGroup, InvalidSolution, Task, definition_hash, instance_hash

TASK_GROUP = "coevo.tasks"

TASK_NAMES: tuple[str, ...]
"""The registered tasks' names (the built-in nine and those of installed packages); read on first
use (``__getattr__``), so that importing a task by its spec reads no package metadata."""


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "TASK_NAMES":
        return tuple(registered(TASK_GROUP))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownTaskError(PluginError, KeyError):
    """A task that cannot be found or built; one line for the CLI."""

    def __str__(self) -> str:
        return str(self.args[0])


def task_class(name: str) -> type[Task]:
    """The class `name` names; UnknownTaskError (one line) when it is missing or not a Task."""
    try:
        cls = load(TASK_GROUP, name, "task")
    except PluginError as exc:
        raise UnknownTaskError(str(exc)) from None
    if not issubclass(cls, Task):
        raise UnknownTaskError(f"task {name!r}: {cls.__name__} does not subclass tasks.Task")
    return cls


def get_task(name: str) -> Task:
    """Instantiate a task by name or spec; raises UnknownTaskError (a KeyError) in one line."""
    cls = task_class(name)
    try:
        return cls()
    except Exception as exc:
        raise UnknownTaskError(f"task {name!r}: {cls.__name__}() raised {type(exc).__name__}: {exc}") from None


__all__ = [
    "SPLITS",
    "TASK_NAMES",
    "InstanceGroup",
    "InvalidSolution",
    "Task",
    "UnknownTaskError",
    "definition_hash",
    "get_task",
    "instance_hash",
    "task_class",
]
