"""Instance streams drawn exactly as the published AHD generators draw them.

ReEvo and MCTS-AHD seed numpy's legacy global generator once and then draw their train, val and
test arrays one after another from that single stream. Reproducing the published instance sets
therefore means replaying the same draws in the same order, which is what these helpers do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def uniform_stream(seed: int, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """Consecutive ``rand(*shape)`` draws from ``RandomState(seed)``, one array per shape."""
    rng = np.random.RandomState(seed)
    return [rng.rand(*shape) for shape in shapes]
