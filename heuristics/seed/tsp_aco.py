"""Seed for TSP under ACO: ReEvo's published seed, the inverse distance."""

import numpy as np


def heuristics(distance_matrix: np.ndarray) -> np.ndarray:
    """Rate edge (i, j) by 1 / distance, the visibility of classic Ant System.

    Short edges are more promising; the colony's pheromone does the rest. The diagonal of
    distance_matrix holds 1, so the division is safe (self-loops are never taken).
    """
    return 1.0 / distance_matrix
