"""Seed for TSP under ACO: inverse squared distance, Ant System's textbook visibility (beta = 2)."""

import numpy as np


def heuristics(distance_matrix: np.ndarray) -> np.ndarray:
    """Rate edge (i, j) by 1 / distance**2.

    Plain 1 / distance spreads the ants' choices over far cities too; squaring it is the
    beta = 2 that Dorigo et al. recommend for Ant System and concentrates the colony on the
    short edges an optimal tour is made of. The diagonal holds 1, so the division is safe.
    """
    return 1.0 / distance_matrix**2
