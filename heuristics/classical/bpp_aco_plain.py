"""Plain ACO prior for offline bin packing: every item is as attractive as its relative size,
whatever it is paired with (large items first, the rule behind first-fit decreasing)."""

import numpy as np


def heuristics(demand: np.ndarray, capacity: int) -> np.ndarray:
    return np.tile(demand / demand.max(), (len(demand), 1))
