"""Greedy for the knapsack: take the fitting item with the highest value/weight ratio."""

import numpy as np


def select_next_item(remaining_capacity: float, weights: np.ndarray, values: np.ndarray) -> int:
    return int(np.argmax(np.where(weights <= remaining_capacity, values / weights, -np.inf)))
