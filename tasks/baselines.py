"""Trusted, in-process evaluation of shipped heuristics (seed and classical) over a split.

Shipped heuristics are our own code, so they skip the sandbox: this is what the demo table and
the baseline tests use. Candidate code from an LLM must go through ``coevo.evaluate`` instead.

A file in ``heuristics/classical/<task>_<name>.py`` is either a heuristic (it defines the task's
function, driven by ``Task.construct``) or a whole solver (it defines ``solve(instance)``, e.g.
farthest insertion for the TSP); both are scored by ``Task.score``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import SEED_DIR, Instance, SplitName, Task
from tasks.references import MissingReferences, gap_pct, group_references

CLASSICAL_DIR = SEED_DIR.parent / "classical"
SOLVER_FUNCTION = "solve"

Solver = Callable[[Instance], Any]


@dataclass(frozen=True)
class GroupResult:
    """Mean objective of one instance group, in the task's natural sign (lengths, values, sizes)."""

    label: str
    objective: float
    gap_pct: float | None
    n_instances: int


def _definitions(source: str, origin: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, origin, "exec"), namespace)
    return namespace


def load_function(source: str, function_name: str, origin: str = "<heuristic>") -> Callable[..., Any]:
    """Execute trusted heuristic source and return the named function from it."""
    function = _definitions(source, origin).get(function_name)
    if not callable(function):
        raise ValueError(f"{origin} defines no function {function_name!r}")
    return function


def heuristic_solver(task: Task, heuristic: Callable[..., Any]) -> Solver:
    """A solver that builds each solution by driving the heuristic through the task."""
    return lambda instance: task.construct(heuristic, instance)


def file_solver(task: Task, path: Path) -> Solver:
    """The solver a shipped file stands for: its heuristic driven by the task, or its ``solve``."""
    namespace = _definitions(path.read_text(), str(path))
    if callable(namespace.get(task.function_name)):
        return heuristic_solver(task, namespace[task.function_name])
    if callable(namespace.get(SOLVER_FUNCTION)):
        return namespace[SOLVER_FUNCTION]
    raise ValueError(f"{path} defines neither {task.function_name!r} nor {SOLVER_FUNCTION!r}")


def seed_solver(task: Task) -> Solver:
    source = task.module_source(task.seed_code())  # a program task's seed is its whole program
    return heuristic_solver(task, load_function(source, task.function_name, f"seed of {task.name}"))


def classical_files(task: Task) -> dict[str, Path]:
    """The task's classical baselines by short name, e.g. {"nearest_neighbour": .../tsp_construct_nearest_neighbour.py}."""
    prefix = f"{task.name}_"
    return {path.stem[len(prefix) :]: path for path in sorted(CLASSICAL_DIR.glob(f"{prefix}*.py"))}


def evaluate_split(
    task: Task,
    split: SplitName,
    solve: Solver,
    limit: int | None = None,
    labels: Collection[str] | None = None,
) -> list[GroupResult]:
    """Solve and score the split's instances: all groups or the named ones, all instances or ``limit``.

    The gap uses the shipped references of the same instances (None where none are shipped);
    references that no longer match the whole group's instances raise ReferenceMismatch.
    """
    results = []
    for group in task.groups(split):
        if labels is not None and group.label not in labels:
            continue
        instances = group.instances[:limit] if limit is not None else group.instances
        objectives = np.array([task.score(instance, solve(instance)) for instance in instances])
        try:
            gap = gap_pct(objectives, group_references(task, split, group)[: len(instances)], task.sense)
        except MissingReferences:
            gap = None
        results.append(GroupResult(group.label, float(objectives.mean()), gap, len(instances)))
    return results
