"""Online bin packing (FunSearch): a priority function picks the bin for each arriving item.

Items follow FunSearch's Weibull benchmark: Weibull(shape 3) x 45, truncated to integers and
kept in [1, 100]. The sequences are drawn in MCTS-AHD's order from one ``RandomState(1234)``
stream (train 5k and 1k, validation 5 x 5k and 5 x 1k, test 5 x 1k/5k/10k for capacity 100 then
for capacity 500). MCTS-AHD rounds instead of truncating, but the published figures (best fit
3.98%, FunSearch 0.68%) are measured on FunSearch's own "Weibull 5k" set, whose L1 bound (1987.8
bins on average) matches truncation (about 1985 expected) and not rounding (about 2010).
The published search set packs the two train sequences into bins of capacity 100 and 500.
The test split also holds FunSearch's OR1-OR4 groups (``or1`` .. ``or4``: OR-Library's
binpack1-4, 20 instances of 120/250/500/1000 items, capacity 150, see ``tasks.or_library``).
Every item sees all bins it fits in, including the still empty ones (one bin per item is
available), and goes to the bin with the highest priority. The objective is the number of bins
used; the reference is the L1 lower bound ceil(sum / capacity) for the Weibull groups, so their
gap is the excess in %, and the best-known bin count the OR-Library lists for the OR groups.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tasks.base import Heuristic, Instance, InstanceGroup, InvalidSolution, ShippedTask, SplitName
from tasks.checks import returned_index, returned_scores
from tasks.or_library import best_known_bins, or_library_classes

STREAM_SEED = 1234
WEIBULL_SHAPE = 3.0
WEIBULL_SCALE = 45.0
MAX_ITEM = 100

DRAWS: tuple[tuple[str, int, int], ...] = (
    ("train_5k", 1, 5000),
    ("train_1k", 1, 1000),
    ("val_5k", 5, 5000),
    ("val_1k", 5, 1000),
    ("test_1k_c100", 5, 1000),
    ("test_5k_c100", 5, 5000),
    ("test_10k_c100", 5, 10000),
    ("test_1k_c500", 5, 1000),
    ("test_5k_c500", 5, 5000),
    ("test_10k_c500", 5, 10000),
)
"""(draw name, sequence count, items per sequence) in the order the stream is drawn."""

SPLIT_GROUPS: dict[SplitName, tuple[tuple[str, str, int], ...]] = {
    "search": (("1k_c100", "train_1k", 100), ("1k_c500", "train_1k", 500),
               ("5k_c100", "train_5k", 100), ("5k_c500", "train_5k", 500)),
    "val": (("1k_c100", "val_1k", 100), ("1k_c500", "val_1k", 500),
            ("5k_c100", "val_5k", 100), ("5k_c500", "val_5k", 500)),
    "test": (("1k_c100", "test_1k_c100", 100), ("5k_c100", "test_5k_c100", 100),
             ("10k_c100", "test_10k_c100", 100), ("1k_c500", "test_1k_c500", 500),
             ("5k_c500", "test_5k_c500", 500), ("10k_c500", "test_10k_c500", 500)),
}  # fmt: skip
"""split -> (group label, draw name, bin capacity)."""


def weibull_items(rng: np.random.RandomState, count: int) -> np.ndarray:
    """One item sequence of integer sizes in [1, MAX_ITEM] (a zero-size item would be meaningless)."""
    sizes = np.floor(rng.weibull(WEIBULL_SHAPE, count) * WEIBULL_SCALE)
    return np.clip(sizes, 1, MAX_ITEM).astype(np.int64)


@functools.cache
def _draws() -> dict[str, tuple[np.ndarray, ...]]:
    rng = np.random.RandomState(STREAM_SEED)
    return {name: tuple(weibull_items(rng, size) for _ in range(count)) for name, count, size in DRAWS}


def _empty_bins(instance: Instance) -> np.ndarray:
    """One bin per item (the most a packing can use), each with the full capacity left."""
    return np.full(len(instance["items"]), float(instance["capacity"]))


OR_LIBRARY_SPLIT: SplitName = "test"
"""The split that carries the OR-Library groups (they are published test benchmarks)."""


@functools.cache
def _groups(split: SplitName) -> tuple[InstanceGroup, ...]:
    weibull = tuple(
        InstanceGroup(label, [{"items": items, "capacity": capacity} for items in _draws()[draw]])
        for label, draw, capacity in SPLIT_GROUPS[split]
    )
    if split != OR_LIBRARY_SPLIT:
        return weibull
    or_library = tuple(
        InstanceGroup(cls.label, [{"items": items, "capacity": cls.capacity} for items in cls.instances])
        for cls in or_library_classes()
    )
    return weibull + or_library


class BPPOnline(ShippedTask):
    name = "bpp_online"
    function_name = "priority"
    signature = "def priority(item: float, bins_remain_cap: np.ndarray) -> np.ndarray"
    description = (
        "Online bin packing: items arrive one at a time and must be placed immediately. For each "
        "item, priority is called with the item's size and a 1-D array with the remaining "
        "capacity of every bin the item fits in (bins already used and empty ones, all of the same "
        "capacity); it returns an array of the same length with one score per bin, and the item "
        "goes to the bin with the highest score. Item sizes follow a Weibull distribution (mean "
        "about 40, at most 100) and bins hold 100 or 500. The goal is to use as few bins as possible."
    )
    reference_name = "L1 lower bound ceil(sum/C); OR-Library groups: best-known bin counts"
    child_runs_driver = True  # a few cheap checks per call: one message per instance, not per step
    instance_seconds = 30.0  # 10k items, one priority call per item

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return list(_groups(split))

    async def drive(self, heuristic: Heuristic, instance: Instance) -> np.ndarray:
        remaining = _empty_bins(instance).tolist()  # plain floats: the same arithmetic, a fraction of numpy's cost per item
        assignment = []
        changed: tuple[int, float] | None = None
        for item in instance["items"].astype(np.float64).tolist():
            chosen = returned_index(await heuristic(item, changed), self.function_name)
            if not 0 <= chosen < len(remaining) or remaining[chosen] < item:
                raise InvalidSolution(f"the {self.function_name} scores chose bin {chosen}, which the item does not fit")
            remaining[chosen] -= item
            assignment.append(chosen)
            changed = (chosen, remaining[chosen])
        return np.asarray(assignment, dtype=np.int64)

    def answer_state(self, instance: Instance) -> np.ndarray:
        """A mirror of every bin's remaining capacity (the driver sends the one bin that changed)."""
        return _empty_bins(instance)

    def answer(
        self, function: Callable[..., Any], remaining: np.ndarray, size: float, changed: tuple[int, float] | None
    ) -> int:
        """The bin the item goes to: the fitting bin the function scores highest."""
        if changed is not None:
            remaining[changed[0]] = changed[1]
        item = np.float64(size)
        fitting = np.flatnonzero(remaining >= item)
        scores = returned_scores(function(item, remaining[fitting].copy()), self.function_name, len(fitting))
        return int(fitting[np.argmax(scores)])

    def score(self, instance: Instance, solution: Any) -> float:
        items, capacity = instance["items"], instance["capacity"]
        assignment = np.asarray(solution)
        if assignment.shape != items.shape or not np.issubdtype(assignment.dtype, np.integer):
            raise InvalidSolution(
                f"an assignment must give one integer bin per item ({len(items)}), "
                f"got shape {assignment.shape} of {assignment.dtype}"
            )
        if assignment.min() < 0 or assignment.max() >= len(items):
            raise InvalidSolution(f"an assignment uses bins outside 0..{len(items) - 1}")
        loads = np.bincount(assignment, weights=items, minlength=len(items))
        overfull = np.flatnonzero(loads > capacity)
        if overfull.size:
            raise InvalidSolution(f"bin {overfull[0]} holds {loads[overfull[0]]:g}, over the capacity {capacity}")
        return float(np.count_nonzero(loads))

    def reference_objective(self, instance: Instance) -> float:
        best_known = best_known_bins(instance["items"], instance["capacity"])
        if best_known is not None:
            return float(best_known)
        return float(np.ceil(instance["items"].sum() / instance["capacity"]))
