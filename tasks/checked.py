"""A task checked before anything runs on it, so a broken problem of one's own stops in one line.

`coevo tasks eval`, `tasks baselines`, `run` and `tune` load their task through `checked_task`: it
checks that the required members are there, asks for the seed heuristic, generates the splits the
command uses and their references. Whatever is wrong is an `UnknownTaskError` naming the task and
the member, raised before a sandbox starts or a run directory is made; without this check the same
mistakes surfaced mid-run as tracebacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from coevo.plugins import one_line
from tasks import UnknownTaskError, get_task
from tasks.base import InstanceGroup, SplitName, Task
from tasks.references import MissingReferences, ReferenceMismatch, group_references

REQUIRED_ATTRIBUTES = ("name", "function_name", "signature", "description")
"""Class attributes every task sets, as non-empty strings."""
REQUIRED_METHODS = ("groups", "drive", "score", "seed_code")
"""Methods every task defines; the others (`references`, `answer`, `answer_state`) have defaults."""

T = TypeVar("T")


def checked_task(name: str, splits: Iterable[SplitName]) -> Task:
    """The task `name` names, once its members, seed heuristic, and the instances and references of
    `splits` are known to be sound; UnknownTaskError (one line) otherwise."""
    task = get_task(name)
    cls = type(task).__name__
    for attribute in REQUIRED_ATTRIBUTES:
        value = getattr(task, attribute, None)
        if not isinstance(value, str) or not value:
            raise UnknownTaskError(f"task {name!r}: {cls} needs the class attribute {attribute!r}, a non-empty str")
    for method in REQUIRED_METHODS:
        if getattr(type(task), method) is getattr(Task, method):
            raise UnknownTaskError(f"task {name!r}: {cls} defines no {method}(), which every task needs")
    seed = _called(name, f"{cls}.seed_code()", task.seed_code)
    if not isinstance(seed, str) or not seed.strip():
        raise UnknownTaskError(f"task {name!r}: {cls}.seed_code() must return the seed heuristic's source as a str")
    for split in splits:
        for group in _groups(name, task, split):
            try:
                _called(name, f"{cls}.references({split!r}, {group.label!r})", group_references, task, split, group)
            except MissingReferences:  # no references: the task shows no gap, which is allowed
                pass
    return task


def _groups(name: str, task: Task, split: SplitName) -> list[InstanceGroup]:
    call = f"{type(task).__name__}.groups({split!r})"
    groups = _called(name, call, task.groups, split)
    if not isinstance(groups, list) or not groups:
        raise UnknownTaskError(f"task {name!r}: {call} must return a non-empty list of tasks.InstanceGroup")
    for group in groups:
        if not isinstance(group, InstanceGroup):
            raise UnknownTaskError(
                f"task {name!r}: {call} returned a {type(group).__name__}; expected InstanceGroup(label, instances)"
            )
        if not isinstance(group.instances, list) or not group.instances:
            raise UnknownTaskError(f"task {name!r}: {call}: group {group.label!r} holds no list of instances")
        odd = next((i for i in group.instances if not isinstance(i, dict)), None)
        if odd is not None:
            raise UnknownTaskError(
                f"task {name!r}: {call}: group {group.label!r} holds a {type(odd).__name__}; an instance is a dict"
            )
    return groups


def _called(name: str, call: str, function: Callable[..., T], *args: Any) -> T:
    """`function(*args)`, its failure turned into one line naming the task and `call`."""
    try:
        return function(*args)
    except (MissingReferences, UnknownTaskError):
        raise
    except ReferenceMismatch as exc:
        raise UnknownTaskError(f"task {name!r}: {exc}") from None
    except NotImplementedError:
        raise UnknownTaskError(f"task {name!r}: {call} is not implemented, and every task needs it") from None
    except Exception as exc:
        raise UnknownTaskError(f"task {name!r}: {call} raised {one_line(exc)}") from None
