"""Seed for offline bin packing under ACO: ReEvo's published seed, partners rated by size."""

import numpy as np


def heuristics(demand: np.ndarray, capacity: int) -> np.ndarray:
    """Rate putting item j in a bin with item i by j's size relative to the largest item.

    Every row is the same: large items are preferred whatever the bin already holds, which
    packs the hard-to-place items first (the idea behind first-fit decreasing).
    """
    return np.tile(demand / demand.max(), (len(demand), 1))
