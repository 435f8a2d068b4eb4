"""Seed for CVRP under ACO: ReEvo's published seed, the inverse distance."""

import numpy as np


def heuristics(distance_matrix: np.ndarray, coordinates: np.ndarray, demands: np.ndarray, capacity: int) -> np.ndarray:
    """Rate the move from node i to node j by 1 / distance, ignoring loads.

    The colony already masks customers that no longer fit the vehicle, so this prior only says
    which moves are short. Node 0 is the depot; the diagonal holds 1, so the division is safe.
    """
    return 1.0 / distance_matrix
