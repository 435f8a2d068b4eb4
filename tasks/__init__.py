"""The heuristic-design tasks. ``get_task(name)`` is the one entry point.

A task is named by a registered name (the ``coevo.tasks`` entry-point group: coevo's nine register
there like any package's), by ``path/to/problem.py:Class`` / ``package.module:Class``, or by the
path of a program folder in OpenEvolve's layout (``tasks.program_task``).
"""

from __future__ import annotations

from pathlib import Path

from coevo.plugins import PluginError, Registry, names_folder
from tasks.base import SPLITS, InstanceGroup, InvalidSolution, Task, definition_hash, instance_hash

TASKS = Registry(
    "coevo.tasks",
    "task",
    lambda cls: None if issubclass(cls, Task) else "it does not subclass tasks.Task",
)

TASK_NAMES: tuple[str, ...]
"""The registered tasks' names (the built-in nine and those of installed packages); read on first
use (``__getattr__``), so that importing a task by its spec reads no package metadata."""


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "TASK_NAMES":
        return TASKS.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownTaskError(PluginError, KeyError):
    """A task that cannot be found or built; one line for the CLI."""

    def __str__(self) -> str:
        return str(self.args[0])


def task_class(name: str) -> type[Task]:
    """The class `name` names; UnknownTaskError (one line) when it is missing or not a Task."""
    if names_folder(name):
        return _program_task_class(name)
    try:
        return TASKS.get(name)
    except PluginError as exc:
        raise UnknownTaskError(str(exc)) from None


def _program_task_class(folder: str) -> type[Task]:
    from tasks.program.layout import LayoutError  # only program folders pay for these imports
    from tasks.program_task import program_task_class

    try:
        return program_task_class(Path(folder).expanduser().resolve())
    except LayoutError as exc:
        raise UnknownTaskError(f"task {folder!r}: {exc}") from None


def get_task(name: str) -> Task:
    """Instantiate a task by name or spec; raises UnknownTaskError (a KeyError) in one line."""
    cls = task_class(name)
    try:
        return cls()
    except UnknownTaskError:
        raise
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
