"""CVRP under ACO: the heuristic returns an edge prior, Ant System builds the routes.

Instances replay ReEvo/MCTS-AHD's ``cvrp_aco`` generator: depot at (0.5, 0.5), customers uniform
in the unit square, demands uniform integers in 1..9, capacity 50; one ``RandomState(1234)``
stream draws each instance's coordinates then its demands, in this order: 10 x CVRP50 (the
published search set), 64 x CVRP20/50/100 (published validation; our val split keeps the first
16 CVRP50), then 64 x CVRP50/100 (the published test sets). ReEvo's generator draws 64 x
CVRP20 test instances first; on that order plain ACO scores 11.253 on CVRP50 against 11.372 on
ours and the published 11.355, which supports the order used here. Node 0 is the depot. Colony:
30 ants, decay 0.9, alpha = beta = 1; 100 iterations on search and val, 500 on test (MCTS-AHD's
``eval_black_box_test.py``).

Reference: a lower bound, the larger of (a) the m-TSP relaxation: the shortest closed tour
through all customers and k = ceil(total demand / capacity) copies of the depot, no two copies
adjacent (merging depot visits of any feasible solution down to k only shortens it, by the
triangle inequality; solved with LKH-3, which finds the optimum at these sizes in practice but
does not prove it) and (b) the radial bound 2 * sum(demand_i * dist(depot, i)) / capacity.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from coevo.extras import require
from tasks.aco import ColonySettings, cvrp_colony
from tasks.aco_task import ACOTask, heuristic_distances, integer_vector, protocol_fields
from tasks.base import Instance, InstanceGroup, InvalidSolution, SplitName
from tasks.tsp_construct import distance_matrix

STREAM_SEED = 1234
CAPACITY = 50
DEMAND_RANGE = (1, 9)
DEPOT = (0.5, 0.5)
N_ANTS = 30
DECAY = 0.9
LKH_SCALE = 100_000
"""LKH works on integer distances (and multiplies them by 100 internally): 1e5 keeps both the
rounding (< 1e-5 per edge) and the forbidden-edge cost below LKH's integer limits."""
LKH_FORBIDDEN = 10**7
LAYOUT: tuple[tuple[SplitName | None, int, int, int, int], ...] = (
    ("search", 10, 50, 10, 100),
    (None, 64, 20, 0, 0),
    ("val", 64, 50, 16, 100),
    (None, 64, 100, 0, 0),
    ("test", 64, 50, 64, 500),
    ("test", 64, 100, 64, 500),
)
"""(split or None when unused, instances drawn, customers, instances kept, ACO iterations),
in the order the stream is drawn."""


def _draw_instance(rng: np.random.RandomState, customers: int) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates (depot first) and integer demands (0 at the depot), in the published draw order."""
    locations = rng.rand(customers, 2)
    demands = rng.randint(DEMAND_RANGE[0], DEMAND_RANGE[1] + 1, size=customers)
    return np.vstack([DEPOT, locations]), np.concatenate([[0], demands]).astype(np.int64)


@functools.cache
def _all_groups() -> dict[SplitName, tuple[InstanceGroup, ...]]:
    rng = np.random.RandomState(STREAM_SEED)
    groups: dict[SplitName, list[InstanceGroup]] = {"search": [], "val": [], "test": []}
    for split, count, customers, kept, iterations in LAYOUT:
        drawn = [_draw_instance(rng, customers) for _ in range(count)]
        if split is not None:
            instances = [
                {"coords": coords, "demands": demands, "capacity": np.int64(CAPACITY), **protocol_fields(i, iterations)}
                for i, (coords, demands) in enumerate(drawn[:kept])
            ]
            groups[split].append(InstanceGroup(f"n{customers}", instances))
    return {split: tuple(found) for split, found in groups.items()}


class CVRPACO(ACOTask):
    name = "cvrp_aco"
    signature = (
        "def heuristics(distance_matrix: np.ndarray, coordinates: np.ndarray, "
        "demands: np.ndarray, capacity: int) -> np.ndarray"
    )
    description = (
        "Capacitated vehicle routing solved by Ant Colony Optimisation. Node 0 is the depot at "
        "(0.5, 0.5); nodes 1..n are customers uniform in the unit square. heuristics receives the "
        "(n+1, n+1) Euclidean distance matrix (its diagonal holds 1), the (n+1, 2) coordinates, "
        "the (n+1,) demands (0 for the depot, integers 1..9 otherwise) and the vehicle capacity "
        "(50). It returns an (n+1, n+1) array of non-negative finite numbers: entry [i, j] says "
        "how promising it is to go from node i to node j. Ants build routes from the depot, "
        "choosing the next node with probability proportional to pheromone times this prior "
        "among the nodes that respect the capacity. The goal is the shortest total length of "
        "routes that start and end at the depot and serve every customer once."
    )
    reference_name = "lower bound: max(m-TSP relaxation by LKH-3, radial 2*sum(q*r)/C)"
    instance_seconds = 60.0  # set by the CVRP100 test instances (their timing: experiments/bench/RESULTS.md)

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return list(_all_groups()[split])

    def heuristic_arguments(self, instance: Instance) -> tuple[Any, ...]:
        distances = heuristic_distances(instance["coords"])
        return distances, instance["coords"].copy(), instance["demands"].astype(np.float64), int(instance["capacity"])

    def prior_size(self, instance: Instance) -> int:
        return len(instance["coords"])

    def run_colony(self, instance: Instance, prior: np.ndarray) -> list[list[int]]:
        settings = ColonySettings(N_ANTS, int(instance["aco_iterations"]), DECAY)
        return cvrp_colony(
            distance_matrix(instance["coords"]),
            instance["demands"],
            int(instance["capacity"]),
            prior,
            settings,
            int(instance["aco_seed"]),
        )

    def score(self, instance: Instance, solution: Any) -> float:
        routes = _validated_routes(solution, instance["demands"], int(instance["capacity"]))
        distances = distance_matrix(instance["coords"])
        return float(sum(distances[route[:-1], route[1:]].sum() for route in routes))

    def reference_objective(self, instance: Instance) -> float:
        coords, demands, capacity = instance["coords"], instance["demands"], int(instance["capacity"])
        radial = 2.0 * float((demands * np.linalg.norm(coords - coords[0], axis=1)).sum()) / capacity
        return max(_depot_copies_tour_length(coords, math.ceil(int(demands.sum()) / capacity)), radial)


def _validated_routes(solution: Any, demands: np.ndarray, capacity: int) -> list[np.ndarray]:
    """The routes as int arrays, after checking depot ends, node range, loads and single visits."""
    n_nodes = len(demands)
    if isinstance(solution, (str, bytes, np.ndarray)) or not hasattr(solution, "__iter__"):
        raise InvalidSolution(f"a CVRP solution must be a list of routes, got {type(solution).__name__}")
    routes = [integer_vector(route, f"route {k}") for k, route in enumerate(solution)]
    for k, route in enumerate(routes):
        if len(route) < 3 or route[0] != 0 or route[-1] != 0:
            raise InvalidSolution(
                f"route {k} must start and end at the depot (0) and serve a customer: {route.tolist()[:8]}"
            )
        inner = route[1:-1]
        if np.any(inner == 0):
            raise InvalidSolution(f"route {k} passes through the depot; split it into separate routes")
        if np.any((inner < 0) | (inner >= n_nodes)):
            raise InvalidSolution(f"route {k} names a node outside 1..{n_nodes - 1}")
        load = int(demands[inner].sum())
        if load > capacity:
            raise InvalidSolution(f"route {k} carries {load}, over the capacity {capacity}")
    served = np.concatenate([route[1:-1] for route in routes] or [np.zeros(0, dtype=np.int64)])
    visits = np.bincount(served, minlength=n_nodes)[1:]
    if np.any(visits != 1):
        customer = int(np.flatnonzero(visits != 1)[0]) + 1
        raise InvalidSolution(f"customer {customer} is visited {int(visits[customer - 1])} times, expected once")
    return routes


def _depot_copies_tour_length(coords: np.ndarray, copies: int) -> float:
    """Shortest closed tour (by LKH-3) through the customers and ``copies`` depot copies, never
    moving from one copy straight to another."""
    elkai = require("elkai", "references", "the CVRP reference (LKH-3)")

    nodes = np.concatenate([np.zeros(copies, dtype=np.int64), np.arange(1, len(coords))])
    distances = distance_matrix(coords[nodes])
    forbidden = np.zeros(distances.shape, dtype=bool)
    forbidden[:copies, :copies] = True
    np.fill_diagonal(forbidden, False)
    weights = np.rint(distances * LKH_SCALE).astype(np.int64)
    weights[forbidden] = LKH_FORBIDDEN
    tour = np.asarray(elkai.DistanceMatrix(weights.tolist()).solve_tsp(runs=1)[:-1])
    following = np.roll(tour, -1)
    if forbidden[tour, following].any():
        raise RuntimeError("LKH returned a tour with two adjacent depot copies")
    return float(distances[tour, following].sum())
