"""Seed for online bin packing: the best Weibull priority FunSearch reported (Romera-Paredes et al. 2023)."""

import numpy as np


def priority(item: float, bins_remain_cap: np.ndarray) -> np.ndarray:
    """Score bins by how the item would fill them, then reward a score rise over the previous bin.

    The polynomial in the remaining capacity (relative to the emptiest bin and to the item)
    favours tight fits; flipping the sign for bins with room to spare and differencing
    neighbouring scores is the pattern FunSearch found to beat best fit on Weibull items.
    """
    emptiest = np.max(bins_remain_cap)
    score = (bins_remain_cap - emptiest) ** 2 / item
    score += bins_remain_cap**2 / item**2
    score += bins_remain_cap**2 / item**3
    roomy = bins_remain_cap > item
    score[roomy] = -score[roomy]
    score[1:] = score[1:] - score[:-1].copy()
    return score
