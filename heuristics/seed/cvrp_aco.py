"""Seed for CVRP under ACO: inverse squared distance, Ant System's textbook visibility (beta = 2)."""

import numpy as np


def heuristics(distance_matrix: np.ndarray, coordinates: np.ndarray, demands: np.ndarray, capacity: int) -> np.ndarray:
    """Rate the move from node i to node j by 1 / distance**2, whatever the loads.

    The engine already masks customers that do not fit, so the prior only needs to say which
    moves are short; squaring the inverse distance (beta = 2) keeps routes compact instead of
    letting ants wander across the square. The diagonal holds 1, so the division is safe.
    """
    return 1.0 / distance_matrix**2
