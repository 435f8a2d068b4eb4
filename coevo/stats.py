"""Paired comparisons of two methods (wins/ties/losses, the Wilcoxon signed-rank test), paired binary
outcomes (exact McNemar), a rate against chance (exact binomial, or Poisson-binomial where each episode
has its own rate), Holm's correction for tests that share data, and success-rate intervals.

Grids of runs are small (a few tasks x budgets x seeds), so the test is exact where it can be: the null
distribution of the signed-rank statistic is enumerated for up to `EXACT_UP_TO` non-zero differences
(ties in |difference| get mid-ranks, and the enumeration uses those mid-ranks, so ties stay exact), and
approximated by a normal distribution with tie and continuity corrections above that. No scipy needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

EXACT_UP_TO = 20
"""Largest number of non-zero differences whose null distribution is enumerated exactly."""


@dataclass(frozen=True)
class WilcoxonResult:
    statistic: float
    """W+: the sum of the ranks of the positive differences."""
    n: int
    """Non-zero differences the test used (zeros are dropped)."""
    p_value: float
    """Two-sided p-value; 1.0 when no difference is non-zero."""
    method: Literal["exact", "normal", "none"]


def midranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks of `values`, tied values sharing the mean of the ranks they span."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def wilcoxon_signed_rank(differences: Sequence[float], exact_up_to: int = EXACT_UP_TO) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test that the paired differences are centred on zero."""
    nonzero = np.asarray([d for d in differences if d != 0], dtype=float)
    if np.isnan(nonzero).any():
        raise ValueError("differences must not contain NaN")
    n = len(nonzero)
    if n == 0:
        return WilcoxonResult(0.0, 0, 1.0, "none")
    ranks = midranks(np.abs(nonzero))
    statistic = float(ranks[nonzero > 0].sum())
    if n <= exact_up_to:
        return WilcoxonResult(statistic, n, _exact_p(ranks, statistic), "exact")
    return WilcoxonResult(statistic, n, _normal_p(ranks, statistic), "normal")


def smallest_exact_p(n: int) -> float:
    """The smallest two-sided p the exact test can give on `n` non-zero differences (all of one sign):
    below 0.05 only from n = 6 on, so a grid of 5 seeds cannot be significant whatever it shows."""
    if n < 1:
        raise ValueError(f"need at least one non-zero difference, got {n}")
    return min(1.0, 2.0 ** (1 - n))


def _exact_p(ranks: np.ndarray, statistic: float) -> float:
    """P-value from the exact null distribution: every sign pattern of the ranks is equally likely."""
    doubled = np.rint(2 * ranks).astype(np.int64)  # mid-ranks are multiples of 1/2
    counts = np.zeros(int(doubled.sum()) + 1, dtype=np.float64)
    counts[0] = 1.0
    for rank in doubled:
        counts[rank:] = counts[rank:] + counts[: len(counts) - rank]
    observed = int(round(2 * statistic))
    total = counts.sum()
    lower = counts[: observed + 1].sum() / total
    upper = counts[observed:].sum() / total
    return float(min(1.0, 2 * min(lower, upper)))


def _normal_p(ranks: np.ndarray, statistic: float) -> float:
    n = len(ranks)
    mean = n * (n + 1) / 4
    _, tie_sizes = np.unique(ranks, return_counts=True)
    variance = n * (n + 1) * (2 * n + 1) / 24 - float((tie_sizes**3 - tie_sizes).sum()) / 48
    distance = max(abs(statistic - mean) - 0.5, 0.0)
    return min(1.0, math.erfc(distance / math.sqrt(variance) / math.sqrt(2)))


@dataclass(frozen=True)
class PairedComparison:
    """How a treatment fared against its baseline over paired settings (positive improvement: better)."""

    wins: int
    ties: int
    losses: int
    median_improvement: float
    test: WilcoxonResult

    @property
    def settings(self) -> int:
        return self.wins + self.ties + self.losses

    def sentence(self) -> str:
        """The reference's phrasing: 'better in 28 of 36 settings'."""
        return (
            f"better in {self.wins} of {self.settings} settings ({self.ties} ties, {self.losses} worse), "
            f"Wilcoxon p = {self.test.p_value:.3g} ({self.test.method}, n = {self.test.n})"
        )


def compare_paired(improvements: Sequence[float]) -> PairedComparison:
    """Summarise per-setting improvements of a treatment over its baseline (0: tie)."""
    if not improvements:
        raise ValueError("compare_paired needs at least one paired setting")
    values = np.asarray(improvements, dtype=float)
    return PairedComparison(
        wins=int((values > 0).sum()),
        ties=int((values == 0).sum()),
        losses=int((values < 0).sum()),
        median_improvement=float(np.median(values)),
        test=wilcoxon_signed_rank(values),
    )


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a success rate: unlike the normal one, sound at 0/n, n/n and small n."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_tail(successes: int, n: int, chance: float) -> float:
    """P(X >= successes) for X ~ Binomial(n, chance): the one-sided exact test of a rate above chance."""
    if n <= 0 or not 0 <= successes <= n or not 0 < chance < 1:
        raise ValueError(f"need 0 <= successes <= n, n > 0 and 0 < chance < 1, got {successes}, {n}, {chance}")
    return min(1.0, sum(math.comb(n, x) * chance**x * (1 - chance) ** (n - x) for x in range(successes, n + 1)))


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value of paired binary outcomes: of the `gained + lost` discordant
    pairs, how unlikely a split this uneven is under a fair coin (1.0 with no discordant pair)."""
    if gained < 0 or lost < 0:
        raise ValueError(f"counts must be non-negative, got {gained} and {lost}")
    discordant = gained + lost
    if discordant == 0:
        return 1.0
    return min(1.0, 2 * binomial_tail(max(gained, lost), discordant, 0.5))


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values of tests that share data: the k-th smallest of m is multiplied by
    m - k + 1, and adjusted values never decrease along that order (reject where adjusted < alpha)."""
    adjusted, running = {}, 0.0
    order = sorted(p_values, key=p_values.__getitem__)
    for rank, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p_values[name]))
        adjusted[name] = running
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
