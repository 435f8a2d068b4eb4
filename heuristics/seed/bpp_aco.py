"""Seed for offline bin packing under ACO: pair items that fill a bin well, large partners first."""

import numpy as np


def heuristics(demand: np.ndarray, capacity: int) -> np.ndarray:
    """Rate putting items i and j together by the fill they reach times j's relative size.

    Two items that nearly fill a bin leave little waste, and among partners larger items are
    harder to place later (the idea behind first-fit decreasing). Pairs that cannot share a
    bin get 0, which the colony treats as "almost never".
    """
    together = demand[:, None] + demand[None, :]
    fill = np.where(together <= capacity, together / capacity, 0.0)
    return fill * (demand / demand.max())[None, :]
