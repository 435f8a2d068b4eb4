"""Seed for TSP construction: ReEvo's hand-weighted score (near now, central, towards home)."""

import numpy as np


def select_next_node(current_node: int, destination_node: int, unvisited_nodes: set, distance_matrix: np.ndarray) -> int:
    """Take the unvisited city with the lowest weighted score.

    The score favours cities close to the current one, cities far from the rest of the
    unvisited cities (visit outliers before they become expensive detours), cities whose
    distances to the rest vary little, and cities far from the tour's final destination.
    """
    candidates = np.fromiter(unvisited_nodes, dtype=np.int64)
    if len(candidates) == 1:
        return int(candidates[0])
    to_rest = distance_matrix[np.ix_(candidates, candidates)]  # zero diagonal: a city is 0 from itself
    others = len(candidates) - 1
    mean_to_rest = to_rest.sum(axis=1) / others
    spread_to_rest = np.sqrt(np.maximum((to_rest**2).sum(axis=1) / others - mean_to_rest**2, 0.0))
    score = (
        0.4 * distance_matrix[current_node, candidates]
        - 0.3 * mean_to_rest
        + 0.2 * spread_to_rest
        - 0.1 * distance_matrix[destination_node, candidates]
    )
    return int(candidates[np.argmin(score)])
