"""Offline bin packing under ACO: the heuristic returns an item-pair prior, ants fill bins.

Instances replay ReEvo/MCTS-AHD's ``bpp_offline_aco`` generator (after Falkenauer 1996): item
sizes uniform integers in 20..100, capacity 150, each split drawn with ``randint`` from its own
``RandomState(len(split name))``: search ("train", seed 5) 5 x n=500; validation (seed 3) 64 x
n=120/500/1000, of which our val split keeps the first 8 n=500; test (seed 4) 64 x n=500/1000.
Colony: 20 ants, decay 0.95, alpha = beta = 1, prior scaled to a maximum of 1 and floored at
1e-6 as published; 15 iterations on search and val, 100 on test (the published scripts).
Reference: the L1 lower bound ceil(sum of sizes / capacity).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from tasks.aco import ColonySettings, bpp_colony
from tasks.aco_task import ACOTask, integer_vector, protocol_fields
from tasks.base import Instance, InstanceGroup, InvalidSolution, SplitName

CAPACITY = 150
SIZE_RANGE = (20, 100)
N_ANTS = 20
DECAY = 0.95
PRIOR_FLOOR = 1e-6
STREAMS: tuple[tuple[SplitName, str, tuple[tuple[int, int, int, int], ...]], ...] = (
    ("search", "train", ((5, 500, 5, 15),)),
    ("val", "val", ((64, 120, 0, 0), (64, 500, 8, 15), (64, 1000, 0, 0))),
    ("test", "test", ((64, 500, 64, 100), (64, 1000, 64, 100))),
)
"""(our split, published split name whose length seeds the stream, draws of
(instances, items, instances kept, ACO iterations) in order)."""


@functools.cache
def _all_groups() -> dict[SplitName, tuple[InstanceGroup, ...]]:
    groups: dict[SplitName, list[InstanceGroup]] = {"search": [], "val": [], "test": []}
    for split, published_name, draws in STREAMS:
        rng = np.random.RandomState(len(published_name))
        for count, items, kept, iterations in draws:
            sizes = rng.randint(SIZE_RANGE[0], SIZE_RANGE[1] + 1, size=(count, items)).astype(np.int64)
            if kept:
                instances = [
                    {"demands": d, "capacity": np.int64(CAPACITY), **protocol_fields(i, iterations)}
                    for i, d in enumerate(sizes[:kept])
                ]
                groups[split].append(InstanceGroup(f"n{items}", instances))
    return {split: tuple(found) for split, found in groups.items()}


class BPPACO(ACOTask):
    name = "bpp_aco"
    signature = "def heuristics(demand: np.ndarray, capacity: int) -> np.ndarray"
    description = (
        "Offline bin packing solved by Ant Colony Optimisation. heuristics receives the (n,) "
        "integer item sizes (uniform in 20..100) and the bin capacity (150) and returns an "
        "(n, n) array of non-negative finite numbers: entry [i, j] says how promising it is to "
        "put items i and j in the same bin. Ants fill one bin at a time, adding an item that "
        "fits with probability proportional to its mean pheromone times prior towards the items "
        "already in the bin. The goal is to pack all items into as few bins as possible."
    )
    reference_name = "L1 lower bound ceil(sum/C)"
    instance_seconds = 120.0  # set by the BPP1000 test instances (their timing: experiments/bench/RESULTS.md)

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return list(_all_groups()[split])

    def heuristic_arguments(self, instance: Instance) -> tuple[Any, ...]:
        return instance["demands"].copy(), int(instance["capacity"])

    def prior_size(self, instance: Instance) -> int:
        return len(instance["demands"])

    def run_colony(self, instance: Instance, prior: np.ndarray) -> list[int]:
        settings = ColonySettings(N_ANTS, int(instance["aco_iterations"]), DECAY, prior_floor=PRIOR_FLOOR)
        return bpp_colony(instance["demands"], int(instance["capacity"]), prior, settings, int(instance["aco_seed"]))

    def score(self, instance: Instance, solution: Any) -> float:
        demands, capacity = instance["demands"], int(instance["capacity"])
        assignment = integer_vector(solution, "a bin assignment")
        if len(assignment) != len(demands):
            raise InvalidSolution(f"the bin assignment covers {len(assignment)} items, expected {len(demands)}")
        if np.any(assignment < 0):
            raise InvalidSolution(f"item {int(np.flatnonzero(assignment < 0)[0])} has a negative bin number")
        labels, bins = np.unique(assignment, return_inverse=True)
        loads = np.bincount(bins, weights=demands)
        if np.any(loads > capacity):
            worst = int(np.argmax(loads))
            raise InvalidSolution(f"bin {int(labels[worst])} holds {int(loads[worst])}, over the capacity {capacity}")
        return float(len(loads))

    def reference_objective(self, instance: Instance) -> float:
        return float(math.ceil(int(instance["demands"].sum()) / int(instance["capacity"])))
