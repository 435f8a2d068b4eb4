"""Plain ACO prior for the CVRP: inverse distance, ignoring demands and capacity."""

import numpy as np


def heuristics(distance_matrix: np.ndarray, coordinates: np.ndarray, demands: np.ndarray, capacity: int) -> np.ndarray:
    return 1.0 / distance_matrix
