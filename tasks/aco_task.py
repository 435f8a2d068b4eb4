"""What the three ACO tasks (TSP, CVRP, offline BPP) share: one heuristic call, one colony run.

In the ACO framework of DeepACO/ReEvo/MCTS-AHD the candidate does not build solutions itself:
it is called once per instance and returns a prior matrix (how promising each edge or item
pair is), and a fixed Ant Colony Optimisation engine searches with it: the driver, outside the
sandbox, receives the checked prior and runs the colony. The instance carries the
colony's seed and iteration count, so the evaluation protocol is part of the hashed instance set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tasks.aco import check_prior
from tasks.base import Heuristic, Instance, InvalidSolution, ShippedTask
from tasks.tsp_construct import distance_matrix


def protocol_fields(seed: int, n_iterations: int) -> dict[str, np.ndarray]:
    """The per-instance colony settings, stored as numpy scalars so they enter the instance hash."""
    return {"aco_seed": np.int64(seed), "aco_iterations": np.int64(n_iterations)}


def integer_vector(value: Any, what: str) -> np.ndarray:
    """A returned solution part as a 1-D int64 array; floats, bools and ragged data are rejected."""
    if isinstance(value, (str, bytes)):
        raise InvalidSolution(f"{what} must be a sequence of integers, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise InvalidSolution(f"{what} must be a sequence of integers") from None
    if array.ndim != 1 or array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise InvalidSolution(f"{what} must be a flat sequence of integers, got shape {array.shape} of {array.dtype}")
    return array.astype(np.int64)


class ACOTask(ShippedTask):
    """A task whose heuristic returns an ACO prior matrix; subclasses say how to call it and run ACO."""

    function_name = "heuristics"
    lockstep = 1  # one call per instance, answered with an (n, n) matrix: no step to share

    def heuristic_arguments(self, instance: Instance) -> tuple[Any, ...]:
        """Fresh copies of what the heuristic is called with (it may modify them freely)."""
        raise NotImplementedError

    def prior_size(self, instance: Instance) -> int:
        """The prior must be a (size, size) matrix."""
        raise NotImplementedError

    def run_colony(self, instance: Instance, prior: np.ndarray) -> Any:
        """Search with the validated prior and return the best solution found."""
        raise NotImplementedError

    async def drive(self, heuristic: Heuristic, instance: Instance) -> Any:
        return self.run_colony(instance, check_prior(await heuristic(), self.prior_size(instance)))

    def answer(self, function: Callable[..., Any], state: Instance) -> np.ndarray:
        return check_prior(function(*self.heuristic_arguments(state)), self.prior_size(state))


def heuristic_distances(coords: np.ndarray) -> np.ndarray:
    """Distances as the published evaluators hand them to the heuristic: diagonal set to 1, so
    that ``1 / distance`` is finite (self-loops are never taken)."""
    distances = distance_matrix(coords)
    np.fill_diagonal(distances, 1.0)
    return distances
