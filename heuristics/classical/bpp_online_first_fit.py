"""First fit for online bin packing: the first (lowest-numbered) bin the item fits in."""

import numpy as np


def priority(item: float, bins_remain_cap: np.ndarray) -> np.ndarray:
    return -np.arange(len(bins_remain_cap), dtype=np.float64)
