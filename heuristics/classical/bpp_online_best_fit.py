"""Best fit for online bin packing: the fitting bin with the least room left after the item."""

import numpy as np


def priority(item: float, bins_remain_cap: np.ndarray) -> np.ndarray:
    return item - bins_remain_cap
