"""TSP under ACO: the heuristic returns an edge prior, Ant System searches with it.

Instances replay MCTS-AHD's ``tsp_aco`` generator (uniform in the unit square, one
``RandomState(1234)`` stream drawn in this order): 5 x TSP50 (the published search set), 64 x
TSP20/50/100 (published validation; our val split keeps the first 16 TSP50), then 64 x TSP50/100
(the published test sets). ReEvo's generator also draws 64 x TSP20 test instances before the
TSP50 ones, and MCTS-AHD ships such a test20 file, so its test arrays may come from that order;
plain ACO scores alike on both orders, so the order does not explain the distance to the published
figure (experiments/bench/RESULTS.md).

Every colony setting is the published one (MCTS-AHD ``problems/tsp_aco``, identical in ReEvo):
30 ants; 100 iterations when searching (ReEvo's ``eval.py``) and 500 at test (MCTS-AHD's
``eval-test.py`` and ``eval_black_box_test.py``); pheromone starts at 1, keeps 0.9 of itself per
iteration and every ant deposits 1/length on both directions of its edges (``aco.py``);
alpha = beta = 1; each ant starts at a uniformly random city and samples the next one in
proportion to pheromone x prior among the unvisited; the heuristic sees distances with a
diagonal of 1. The colony seed of an instance is its position in its group. References are
LKH-3 tours through ``elkai``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tasks.aco import ColonySettings, tsp_colony
from tasks.aco_task import ACOTask, heuristic_distances, integer_vector, protocol_fields
from tasks.base import Instance, InstanceGroup, InvalidSolution, SplitName
from tasks.generators import uniform_stream
from tasks.tsp_construct import TSPConstruct, distance_matrix, tour_length

STREAM_SEED = 1234
N_ANTS = 30
DECAY = 0.9
LAYOUT: tuple[tuple[SplitName | None, int, int, int, int], ...] = (
    ("search", 5, 50, 5, 100),
    (None, 64, 20, 0, 0),
    ("val", 64, 50, 16, 100),
    (None, 64, 100, 0, 0),
    ("test", 64, 50, 64, 500),
    ("test", 64, 100, 64, 500),
)
"""(split or None when unused, instances drawn, cities, instances kept, ACO iterations),
in the order the stream is drawn."""


@functools.cache
def _all_groups() -> dict[SplitName, tuple[InstanceGroup, ...]]:
    arrays = uniform_stream(STREAM_SEED, [(count, size, 2) for _, count, size, _, _ in LAYOUT])
    groups: dict[SplitName, list[InstanceGroup]] = {"search": [], "val": [], "test": []}
    for (split, _, size, kept, iterations), coords in zip(LAYOUT, arrays):
        if split is not None:
            instances = [{"coords": c, **protocol_fields(i, iterations)} for i, c in enumerate(coords[:kept])]
            groups[split].append(InstanceGroup(f"n{size}", instances))
    return {split: tuple(found) for split, found in groups.items()}


class TSPACO(ACOTask):
    name = "tsp_aco"
    signature = "def heuristics(distance_matrix: np.ndarray) -> np.ndarray"
    description = (
        "Travelling salesman problem solved by Ant Colony Optimisation. heuristics receives the "
        "(n, n) matrix of Euclidean distances between n cities uniform in the unit square (its "
        "diagonal holds 1) and returns an (n, n) array of non-negative finite numbers: entry "
        "[i, j] says how promising it is to travel from city i to city j. Ants then build tours, "
        "choosing the next city with probability proportional to pheromone times this prior; "
        "zeros prune edges. The goal is the shortest closed tour that visits every city once."
    )
    reference_name = "LKH-3 (elkai)"
    instance_seconds = 30.0  # set by the TSP100 test instances (their timing: experiments/bench/RESULTS.md)

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return list(_all_groups()[split])

    def heuristic_arguments(self, instance: Instance) -> tuple[Any, ...]:
        return (heuristic_distances(instance["coords"]),)

    def prior_size(self, instance: Instance) -> int:
        return len(instance["coords"])

    def run_colony(self, instance: Instance, prior: np.ndarray) -> list[int]:
        settings = ColonySettings(N_ANTS, int(instance["aco_iterations"]), DECAY)
        return tsp_colony(distance_matrix(instance["coords"]), prior, settings, int(instance["aco_seed"]))

    def score(self, instance: Instance, solution: Any) -> float:
        coords = instance["coords"]
        tour = integer_vector(solution, "a tour")
        if len(tour) != len(coords):
            raise InvalidSolution(f"the tour lists {len(tour)} cities, expected {len(coords)}")
        if not np.array_equal(np.sort(tour), np.arange(len(coords))):
            raise InvalidSolution(
                f"the tour is not a permutation of the {len(coords)} cities (one is missing or repeated)"
            )
        return tour_length(coords, tour)

    def reference_objective(self, instance: Instance) -> float:
        return TSPConstruct().reference_objective(instance)
