"""Farthest insertion for the TSP: a whole-tour solver, not a next-city rule.

Start from city 0 and the city farthest from it; repeatedly take the city farthest from the
partial tour and insert it where it lengthens the tour least.
"""

import numpy as np


def solve(instance: dict) -> np.ndarray:
    coords = instance["coords"]
    distances = np.linalg.norm(coords[:, None, :] - coords[None, :, :], axis=-1)
    tour = [0, int(np.argmax(distances[0]))]
    distance_to_tour = np.minimum(distances[0], distances[tour[1]])
    in_tour = np.zeros(len(coords), dtype=bool)
    in_tour[tour] = True
    while not in_tour.all():
        city = int(np.argmax(np.where(in_tour, -np.inf, distance_to_tour)))
        path = np.asarray(tour)
        following = np.roll(path, -1)
        added_length = distances[path, city] + distances[city, following] - distances[path, following]
        tour.insert(int(np.argmin(added_length)) + 1, city)
        in_tour[city] = True
        distance_to_tour = np.minimum(distance_to_tour, distances[city])
    return np.asarray(tour, dtype=np.int64)
