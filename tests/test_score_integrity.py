"""Score integrity under breach: a candidate that owns its whole process earns what its answers earn.

With the Python guards off a candidate has the real builtins, so it can rewrite everything in its
process: the task's classes (the driver, the scorer, the colony), the task modules' functions and
globals, numpy and the builtins. Each rewrite here would forge a better objective if the code it
replaces decided the score in that process (the forged driver builds the solution with a cheat
of the task's own choosing). The candidate's function itself answers exactly as the task's seed
does, so the verdict must be exactly the seed's, in root's layering and in a user's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coevo.evaluate import Evaluator, Limits
from layerings import unguarded_evaluator
from tasks import get_task

CHEATS = {
    "tsp_construct": "def cheat(current, destination, unvisited, distances):\n"
    "    return min(unvisited, key=lambda city: distances[current, city])\n",
    "kp_construct": "def cheat(capacity, weights, values):\n"
    "    fits = np.flatnonzero(weights <= capacity)\n"
    "    return int(fits[np.argmax(values[fits])])\n",
    "asp_construct": "def cheat(el, n, w):\n    return float(-el.count(2))\n",
    "bpp_online": "def cheat(item, bins):\n    return -(bins - item)\n",
    "tsp_aco": "def cheat(distances):\n    return distances ** -3.0\n",
    "cvrp_aco": "def cheat(distances, *rest):\n    return distances ** -3.0\n",
    "bpp_aco": "def cheat(demand, capacity):\n    return np.outer(demand, demand) / float(capacity) ** 2\n",
}
"""A different heuristic per task: what a forged driver would build the solution with."""

TAMPERING = '''
import builtins
import sys

import numpy as np

from tasks.base import Task

{cheat}

def forge(cls):
    """Every trusted step of the task, replaced by one that builds its solution with the cheat.

    The forged driver still asks what the task's own asks (the sandbox may run its copy to find
    the answers), then claims the solution the cheat builds.
    """
    build, honest_drive = cls.construct, getattr(cls, "drive", None)

    def construct(self, heuristic, instance):
        return build(self, cheat, instance)

    async def drive(self, heuristic, instance):
        await honest_drive(self, heuristic, instance)
        cls.drive = honest_drive  # build() drives the cheat with the task's own driver
        try:
            return build(self, cheat, instance)
        finally:
            cls.drive = drive

    cls.construct, cls.drive = construct, drive
    cls.score = lambda self, instance, solution: -1e9
    if hasattr(cls, "run_colony"):
        colony = cls.run_colony
        cls.run_colony = lambda self, instance, prior: colony(self, instance, cheat(*self.heuristic_arguments(instance)))
    return construct


TASK_CLASSES = {{value for module in list(sys.modules.values()) for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, Task) and value is not Task}}
FORGED = [forge(cls) for cls in TASK_CLASSES]
for name, module in list(sys.modules.items()):
    if name.startswith("tasks."):
        for global_name in ("PHEROMONE_MIN", "N_ANTS", "DECAY", "SAMPLING_BLOCK"):
            if hasattr(module, global_name):
                setattr(module, global_name, 1)
real_rng = np.random.default_rng
np.random.default_rng = lambda *args, **kwargs: real_rng(2024)
np.linalg.norm = lambda *args, **kwargs: 0.0
builtins.sorted = lambda iterable, **kwargs: list(iterable)


def tampering_held():
    """The rewrites are in place in this process (so the test cannot pass by their failing)."""
    return bool(FORGED) and np.linalg.norm(1.0) == 0.0 and builtins.sorted([2, 1]) == [2, 1]
'''


def tampering_candidate(task_name: str) -> str:
    """The task's seed, with every rewrite above done at import and checked on each call."""
    task = get_task(task_name)
    seed = task.seed_code()
    checked = f"_honest_{task.function_name}"
    return (
        TAMPERING.format(cheat=CHEATS[task_name])
        + seed.replace(f"def {task.function_name}(", f"def {checked}(", 1)
        + f"\n\ndef {task.function_name}(*args):\n"
        + "    assert tampering_held()\n"
        + f"    return {checked}(*args)\n"
    )


@pytest.fixture(
    scope="module",
    params=[(task, layering) for task in sorted(CHEATS) for layering in ("own uids", "shared uid")],
    ids=lambda param: "-".join(param),
)
def unguarded(request: pytest.FixtureRequest) -> Iterator[Evaluator]:
    task, layering = request.param
    limits = Limits(instance_seconds=120, candidate_seconds=240)
    with unguarded_evaluator(layering, task, limit=2, limits=limits) as evaluator:
        yield evaluator


def test_a_candidate_that_owns_its_process_earns_exactly_what_its_answers_earn(unguarded: Evaluator) -> None:
    honest = unguarded.evaluate(unguarded.task.seed_code())
    tampered = unguarded.evaluate(tampering_candidate(unguarded.task.name))
    assert honest.valid, honest.reason
    assert tampered.valid, tampered.reason
    assert tampered.per_instance == honest.per_instance


UNCHECKED_DRIVER = """
import tasks.tsp_construct as module


async def unchecked(self, heuristic, instance):
    city = 0
    for _ in range({calls}):
        city = await heuristic(city)


module.TSPConstruct.drive = unchecked


def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    return {answer}
"""


@pytest.mark.parametrize(
    ("calls", "answer", "reason"),
    [
        (49, "1", "select_next_node returned 1, which is not an unvisited node (already visited)"),
        (1, "1", "the child's answers ended before the instance was built"),
        (60, "min(unvisited_nodes, default=1)", "the child sent more answers than the instance asks for"),
    ],
)
def test_answers_from_a_rewritten_driver_copy_are_checked_by_the_trusted_driver(calls: int, answer: str, reason: str) -> None:
    """The sandbox runs its own copy of the TSP driver (``child_runs_driver``): a candidate that
    rewrites it to skip every check still has each answer checked where the score is decided."""
    with Evaluator("tsp_construct", limit=2, python_guards=False) as evaluator:
        result = evaluator.evaluate(UNCHECKED_DRIVER.format(calls=calls, answer=answer))
    assert result.reason == f"instance 1/2 (n50): {reason}"
