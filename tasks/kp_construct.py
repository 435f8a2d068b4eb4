"""0/1 knapsack, constructive: the heuristic picks the next item to put in the knapsack.

Instances follow MCTS-AHD's generator exactly (weights and values uniform in [0, 1), one
``RandomState(3333)`` stream): 64 x n=100 for search, 64 x n=50/100/200 for validation and
1000 x n=50/100/200 for test, drawn in that order; capacity 12.5 for n=50 and 25 otherwise.
As in the published evaluator, the heuristic sees only the items not yet taken (indices refer to
those arrays) and is called while at least one of them still fits. References are OR-Tools optima.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from coevo.extras import require
from tasks.base import Heuristic, Instance, InstanceGroup, InvalidSolution, ShippedTask, SplitName
from tasks.checks import returned_index
from tasks.generators import uniform_stream

STREAM_SEED = 3333
LAYOUT: tuple[tuple[SplitName, int, int], ...] = (
    ("search", 64, 100),
    ("val", 64, 50),
    ("val", 64, 100),
    ("val", 64, 200),
    ("test", 1000, 50),
    ("test", 1000, 100),
    ("test", 1000, 200),
)
"""(split, instance count, item count) in the order the stream is drawn."""

CAPACITY_TOLERANCE = 1e-9
"""Slack for float round-off when remaining capacities are accumulated step by step."""

SOLVER_SCALE = 10**6
"""OR-Tools solves integer knapsacks: weights are scaled and rounded up, the capacity down, so
its optimum is feasible in the float problem and at most a rounding hair below the float optimum."""


def capacity_for(item_count: int) -> float:
    return 12.5 if item_count == 50 else 25.0


@functools.cache
def _all_groups() -> dict[SplitName, tuple[InstanceGroup, ...]]:
    arrays = uniform_stream(STREAM_SEED, [(count, size, 2) for _, count, size in LAYOUT])
    groups: dict[SplitName, list[InstanceGroup]] = {"search": [], "val": [], "test": []}
    for (split, _, size), draws in zip(LAYOUT, arrays):
        instances = [
            {"weights": d[:, 0].copy(), "values": d[:, 1].copy(), "capacity": capacity_for(size)} for d in draws
        ]
        groups[split].append(InstanceGroup(f"n{size}", instances))
    return {split: tuple(found) for split, found in groups.items()}


class KPConstruct(ShippedTask):
    name = "kp_construct"
    function_name = "select_next_item"
    signature = "def select_next_item(remaining_capacity: float, weights: np.ndarray, values: np.ndarray) -> int"
    description = (
        "0/1 knapsack problem, filled one item at a time. select_next_item is called with the "
        "knapsack's remaining capacity and the weights and values (1-D float arrays, uniform in "
        "[0, 1)) of the items not yet taken; it must return the index, within those arrays, of an "
        "item whose weight fits in the remaining capacity. Chosen items are removed from the "
        "arrays before the next call, and calls stop when no remaining item fits. The goal is the "
        "largest total value of the chosen items."
    )
    reference_name = "OR-Tools optimum"
    child_runs_driver = True  # a few cheap checks per call: one message per instance, not per step
    sense = "max"

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return list(_all_groups()[split])

    async def drive(self, heuristic: Heuristic, instance: Instance) -> np.ndarray:
        weights = instance["weights"].tolist()  # plain floats: the same arithmetic, a fraction of numpy's cost per step
        remaining_capacity = float(instance["capacity"])
        offered = list(range(len(weights)))
        lightest = min(weights, default=math.inf)
        chosen: list[int] = []
        taken: int | None = None
        while offered and lightest <= remaining_capacity + CAPACITY_TOLERANCE:
            position = returned_index(await heuristic(remaining_capacity, taken), self.function_name)
            if not 0 <= position < len(offered):
                raise InvalidSolution(
                    f"{self.function_name} returned {position}, outside 0..{len(offered) - 1} "
                    "(indices refer to the arrays it was given)"
                )
            item = offered.pop(position)
            if weights[item] > remaining_capacity + CAPACITY_TOLERANCE:
                raise InvalidSolution(
                    f"{self.function_name} returned {position}, an item of weight {weights[item]:.6g} "
                    f"that exceeds the remaining capacity {remaining_capacity:.6g}"
                )
            chosen.append(item)
            remaining_capacity -= weights[item]
            if weights[item] == lightest:
                lightest = min((weights[other] for other in offered), default=math.inf)
            taken = position
        return np.asarray(chosen, dtype=np.int64)

    def answer_state(self, instance: Instance) -> dict[str, np.ndarray]:
        """The items, and a mirror of those still offered (the driver sends the position taken)."""
        return {"weights": instance["weights"], "values": instance["values"], "offered": np.arange(len(instance["weights"]))}

    def answer(
        self, function: Callable[..., Any], state: dict[str, np.ndarray], remaining_capacity: float, taken: int | None
    ) -> int:
        if taken is not None:
            state["offered"] = np.delete(state["offered"], taken)
        offered = state["offered"]
        answer = function(remaining_capacity, state["weights"][offered].copy(), state["values"][offered].copy())
        return returned_index(answer, self.function_name)

    def score(self, instance: Instance, solution: Any) -> float:
        weights, values = instance["weights"], instance["values"]
        items = np.asarray(solution)
        if items.ndim != 1 or (items.size and not np.issubdtype(items.dtype, np.integer)):
            raise InvalidSolution(
                f"a packing must be a 1-D array of item indices, got shape {items.shape} of {items.dtype}"
            )
        if items.size and (items.min() < 0 or items.max() >= len(weights)):
            raise InvalidSolution(f"a packing refers to items outside 0..{len(weights) - 1}")
        if len(np.unique(items)) != items.size:
            raise InvalidSolution("a packing takes the same item twice")
        total_weight = float(weights[items].sum())
        if total_weight > instance["capacity"] + CAPACITY_TOLERANCE:
            raise InvalidSolution(f"the packing weighs {total_weight:.6g}, over the capacity {instance['capacity']}")
        return float(values[items].sum())

    def reference_objective(self, instance: Instance) -> float:
        knapsack_solver = require("ortools.algorithms.python.knapsack_solver", "references", "the knapsack reference")

        solver = knapsack_solver.KnapsackSolver(
            knapsack_solver.SolverType.KNAPSACK_MULTIDIMENSION_BRANCH_AND_BOUND_SOLVER, "kp_reference"
        )
        weights, values = instance["weights"], instance["values"]
        solver.init(
            [round(v * SOLVER_SCALE) for v in values],
            [[math.ceil(w * SOLVER_SCALE) for w in weights]],
            [math.floor(instance["capacity"] * SOLVER_SCALE)],
        )
        solver.solve()
        taken = np.asarray([i for i in range(len(weights)) if solver.best_solution_contains(i)], dtype=np.int64)
        return self.score(instance, taken)
