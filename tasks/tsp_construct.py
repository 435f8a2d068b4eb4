"""TSP, constructive: the heuristic picks the next city of a tour that starts and ends at city 0.

Instances follow ReEvo's generator (uniform in the unit square, one ``RandomState(1234)`` stream):
the first 64 TSP50 draws are the published search set; then 64 x TSP50/100/200 for validation and
1000 x TSP50/100/200 for test, drawn in that order from the same stream. References are LKH-3
tours (through ``elkai``), scored in the original float metric.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from coevo.extras import require
from tasks.base import Heuristic, Instance, InstanceGroup, InvalidSolution, ShippedTask, SplitName
from tasks.checks import returned_index
from tasks.generators import uniform_stream

STREAM_SEED = 1234
START_NODE = 0
LAYOUT: tuple[tuple[SplitName, int, int], ...] = (
    ("search", 64, 50),
    ("val", 64, 50),
    ("val", 64, 100),
    ("val", 64, 200),
    ("test", 1000, 50),
    ("test", 1000, 100),
    ("test", 1000, 200),
)
"""(split, instance count, city count) in the order the stream is drawn."""

LKH_COORDINATE_SCALE = 1_000_000
"""LKH works on integer (EUC_2D) distances; this scale keeps rounding far below any tour gap."""


def distance_matrix(coords: np.ndarray) -> np.ndarray:
    """Euclidean distances between all pairs of rows of an (n, 2) array."""
    difference = coords[:, None, :] - coords[None, :, :]
    return np.sqrt((difference**2).sum(axis=-1))


def tour_length(coords: np.ndarray, tour: np.ndarray) -> float:
    """Length of the closed tour visiting ``coords`` in the order given by ``tour``."""
    ordered = coords[tour]
    return float(np.linalg.norm(ordered - np.roll(ordered, -1, axis=0), axis=1).sum())


def _unvisited_at_start(city_count: int) -> set[int]:
    return set(range(city_count)) - {START_NODE}


@functools.cache
def _all_groups() -> dict[SplitName, tuple[InstanceGroup, ...]]:
    arrays = uniform_stream(STREAM_SEED, [(count, size, 2) for _, count, size in LAYOUT])
    groups: dict[SplitName, list[InstanceGroup]] = {"search": [], "val": [], "test": []}
    for (split, _, size), coords in zip(LAYOUT, arrays):
        groups[split].append(InstanceGroup(f"n{size}", [{"coords": c} for c in coords]))
    return {split: tuple(found) for split, found in groups.items()}


class TSPConstruct(ShippedTask):
    name = "tsp_construct"
    function_name = "select_next_node"
    signature = (
        "def select_next_node(current_node: int, destination_node: int, "
        "unvisited_nodes: set, distance_matrix: np.ndarray) -> int"
    )
    description = (
        "Travelling salesman problem, built one city at a time. The tour starts at "
        "destination_node (city 0), and select_next_node is called once per step with the city "
        "the tour is at (current_node), the city it must finally return to (destination_node), "
        "the set of cities not yet visited (unvisited_nodes, a set of ints) and the symmetric "
        "matrix of Euclidean distances between all cities (distance_matrix, cities uniform in the "
        "unit square). It must return one city from unvisited_nodes. The goal is the shortest "
        "closed tour that visits every city once."
    )
    reference_name = "LKH-3 (elkai)"
    child_runs_driver = True  # a few cheap checks per call: one message per instance, not per step

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return list(_all_groups()[split])

    async def drive(self, heuristic: Heuristic, instance: Instance) -> np.ndarray:
        city_count = len(instance["coords"])
        tour = [START_NODE]
        unvisited = _unvisited_at_start(city_count)
        while unvisited:
            city = returned_index(await heuristic(tour[-1]), self.function_name)
            if city not in unvisited:
                why = "already visited" if 0 <= city < city_count else f"outside 0..{city_count - 1}"
                raise InvalidSolution(f"{self.function_name} returned {city}, which is not an unvisited node ({why})")
            tour.append(city)
            unvisited.remove(city)
        return np.asarray(tour, dtype=np.int64)

    def answer_state(self, instance: Instance) -> tuple[np.ndarray, set[int]]:
        """The distances, and a mirror of the unvisited cities (the driver sends each city reached)."""
        return distance_matrix(instance["coords"]), _unvisited_at_start(len(instance["coords"]))

    def answer(self, function: Callable[..., Any], state: tuple[np.ndarray, set[int]], current_node: int) -> int:
        distances, unvisited = state
        unvisited.discard(current_node)
        return returned_index(function(current_node, START_NODE, set(unvisited), distances.copy()), self.function_name)

    def score(self, instance: Instance, solution: Any) -> float:
        coords = instance["coords"]
        tour = np.asarray(solution)
        if tour.shape != (len(coords),) or not np.issubdtype(tour.dtype, np.integer):
            raise InvalidSolution(
                f"a tour must be {len(coords)} integer city indices, got shape {tour.shape} of {tour.dtype}"
            )
        if not np.array_equal(np.sort(tour), np.arange(len(coords))):
            raise InvalidSolution("the tour is not a permutation of all cities (a city is missing or repeated)")
        return tour_length(coords, tour)

    def reference_objective(self, instance: Instance) -> float:
        elkai = require("elkai", "references", "the TSP reference (LKH-3)")

        coords = instance["coords"]
        scaled = {str(city): tuple(map(float, point * LKH_COORDINATE_SCALE)) for city, point in enumerate(coords)}
        closed_tour = elkai.Coordinates2D(scaled).solve_tsp(runs=1)
        return tour_length(coords, np.asarray([int(city) for city in closed_tour[:-1]]))
