"""Seed for circle packing: equal circles on a square grid."""

import math

import numpy as np


def pack_circles(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Put equal circles at the centres of the cells of the smallest square grid with n cells.

    The radius is half a cell less 1e-12, so rounding in the centres never makes neighbours overlap
    under the exact check.
    """
    side = math.ceil(math.sqrt(n))
    cell = 1.0 / side
    rows, columns = np.divmod(np.arange(n), side)
    centres = np.column_stack([(columns + 0.5) * cell, (rows + 0.5) * cell])
    radii = np.full(n, cell / 2 - 1e-12)
    return centres, radii
