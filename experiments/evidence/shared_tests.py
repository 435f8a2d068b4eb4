"""Tests that share data: Holm's correction, so that several arms compared on the same held-out episodes
cannot turn one lucky draw into a finding, and the exact test of a success count against a walker whose
success probability is known per episode (not one rate for all)."""

from __future__ import annotations

from collections.abc import Sequence


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm-adjusted p of each named test: sorted from the smallest, the k-th of m is multiplied by
    m - k + 1 (capped at 1) and never falls below the one before it; reject where adjusted < alpha."""
    adjusted: dict[str, float] = {}
    floor = 0.0
    for rank, name in enumerate(sorted(p_values, key=p_values.__getitem__)):
        floor = max(floor, min(1.0, (len(p_values) - rank) * p_values[name]))
        adjusted[name] = floor
    return adjusted


def poisson_binomial_p(successes: int, probabilities: Sequence[float]) -> float:
    """Two-sided exact p that `successes` of independent episodes, episode i solved with probability
    `probabilities[i]`, lie this far from their expected sum: twice the smaller tail, capped at 1."""
    if not 0 <= successes <= len(probabilities) or any(not 0 <= p <= 1 for p in probabilities):
        raise ValueError(f"need 0 <= successes <= {len(probabilities)} and probabilities in [0, 1]")
    distribution = [1.0]  # P(exactly k solved) over the episodes folded in so far
    for p in probabilities:
        distribution = [
            (distribution[k] if k < len(distribution) else 0.0) * (1 - p) + (distribution[k - 1] * p if k else 0.0)
            for k in range(len(distribution) + 1)
        ]
    lower, upper = sum(distribution[: successes + 1]), sum(distribution[successes:])
    return min(1.0, 2 * min(lower, upper))
