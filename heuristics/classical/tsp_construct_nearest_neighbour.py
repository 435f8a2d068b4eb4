"""Nearest neighbour for the TSP: always go to the closest unvisited city (start at city 0)."""

import numpy as np


def select_next_node(current_node: int, destination_node: int, unvisited_nodes: set, distance_matrix: np.ndarray) -> int:
    return min(unvisited_nodes, key=lambda city: distance_matrix[current_node, city])
