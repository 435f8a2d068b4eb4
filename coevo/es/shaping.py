"""Reward preprocessing before an ES update: invalid-reward penalty and fitness shaping.

Shaping makes the update invariant to the reward's scale (z-score, the reference) or also to its
monotone transformations and outliers (centered ranks, OpenAI-ES).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Shaping = Callable[[np.ndarray], np.ndarray]

ZSCORE_EPS = 1e-8
FLAT_STD = 1e-8


def zscore(rewards: np.ndarray) -> np.ndarray:
    """(r - mean) / (std(ddof=0) + 1e-8), exactly as the reference."""
    rewards = np.asarray(rewards, dtype=np.float64)
    return (rewards - rewards.mean()) / (rewards.std() + ZSCORE_EPS)


def centered_rank(rewards: np.ndarray) -> np.ndarray:
    """Ranks mapped linearly onto [-0.5, 0.5]; tied rewards share their average rank."""
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.size < 2:
        return np.zeros_like(rewards)
    order = np.argsort(rewards, kind="stable")
    ranks = np.empty(rewards.size)
    ranks[order] = np.arange(rewards.size, dtype=np.float64)
    _, tie_group, group_sizes = np.unique(rewards, return_inverse=True, return_counts=True)
    ranks = np.bincount(tie_group, weights=ranks)[tie_group] / group_sizes[tie_group]
    return ranks / (rewards.size - 1) - 0.5


SHAPINGS: dict[str, Shaping] = {"zscore": zscore, "centered_rank": centered_rank}


def penalize_invalid(rewards: Sequence[float | None]) -> np.ndarray | None:
    """Replace invalid rewards (None or NaN) as the reference does, or None if nothing is valid.

    Invalid members score min(valid) - std(valid), or min(valid) - max(0.01 |mean|, 1) when the valid
    rewards are (nearly) all equal, so failures always rank last without dwarfing the spread.
    """
    values = np.array([np.nan if r is None else r for r in rewards], dtype=np.float64)
    if np.isinf(values).any():
        raise ValueError("rewards must be finite; mark invalid members with None or NaN")
    valid = values[~np.isnan(values)]
    if valid.size == 0:
        return None
    spread = valid.std()
    if spread <= FLAT_STD:
        spread = max(0.01 * abs(valid.mean()), 1.0)
    return np.where(np.isnan(values), valid.min() - spread, values)
