"""The Wilcoxon signed-rank test against values worked out by hand, and the paired summary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coevo.stats import (
    binomial_tail,
    compare_paired,
    holm,
    mcnemar_exact,
    midranks,
    smallest_exact_p,
    wilcoxon_signed_rank,
    wilson_interval,
)


def test_midranks_share_the_mean_rank_of_ties() -> None:
    assert midranks([3.0, 1.0, 3.0, 2.0]).tolist() == [3.5, 1.0, 3.5, 2.0]


@pytest.mark.parametrize(
    ("differences", "statistic", "p_value"),
    [
        # ranks 1..4, W+ = 1 + 3 + 4 = 8; of the 16 sign patterns 3 reach W+ >= 8: p = 2 * 3/16
        ([1.0, -2.0, 3.0, 4.0], 8.0, 0.375),
        # all positive: only 1 of 2^n patterns is as extreme on each side
        ([1.0, 2.0, 3.0], 6.0, 0.25),
        ([1.0] * 6, 21.0, 2 / 64),
        # zeros are dropped before ranking
        ([0.0, 0.0, 1.0, 2.0, 3.0], 6.0, 0.25),
        # mid-ranks 1, 2.5, 2.5, 4: W+ = 9; subsets of doubled ranks {2,5,5,8} summing >= 18: 2 of 16
        ([-1.0, 2.0, 2.0, 3.0], 9.0, 0.25),
        # three tied magnitudes (rank 2 each), W+ = 4 sits in the middle of {0, 2, 4, 6}: p capped at 1
        ([1.0, 1.0, -1.0], 4.0, 1.0),
    ],
)
def test_exact_p_values_match_hand_enumeration(differences, statistic, p_value) -> None:
    result = wilcoxon_signed_rank(differences)
    assert result.method == "exact"
    assert result.statistic == statistic
    assert result.p_value == pytest.approx(p_value, abs=1e-12)


def test_no_nonzero_difference_gives_no_evidence() -> None:
    result = wilcoxon_signed_rank([0.0, 0.0])
    assert (result.n, result.p_value, result.method) == (0, 1.0, "none")


def test_large_samples_use_the_normal_approximation() -> None:
    # n = 25 positive differences: W+ = 325, mean 162.5, variance 25*26*51/24 = 1381.25,
    # z = (162.5 - 0.5 continuity) / sqrt(1381.25) = 4.3589, two-sided p = erfc(z / sqrt 2)
    result = wilcoxon_signed_rank(np.arange(1.0, 26.0))
    assert result.method == "normal"
    assert result.statistic == 325.0
    assert result.p_value == pytest.approx(math.erfc(4.35893 / math.sqrt(2)), rel=1e-4)
    assert result.p_value == pytest.approx(1.307e-5, rel=1e-3)


def test_normal_approximation_is_close_to_the_exact_distribution_at_the_switch() -> None:
    differences = np.random.default_rng(0).normal(0.3, 1.0, 20)
    exact = wilcoxon_signed_rank(differences)
    approximate = wilcoxon_signed_rank(differences, exact_up_to=0)
    assert (exact.method, approximate.method) == ("exact", "normal")
    assert approximate.p_value == pytest.approx(exact.p_value, abs=0.02)


def test_the_test_is_two_sided() -> None:
    differences = np.array([0.4, -1.3, 2.2, 0.7, 1.9, -0.2, 3.1])
    forward, backward = wilcoxon_signed_rank(differences), wilcoxon_signed_rank(-differences)
    assert forward.p_value == pytest.approx(backward.p_value)
    assert forward.statistic + backward.statistic == 7 * 8 / 2


def test_nan_differences_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        wilcoxon_signed_rank([1.0, float("nan")])


def test_the_smallest_exact_p_is_every_difference_one_way() -> None:
    for n in range(1, 9):
        assert smallest_exact_p(n) == wilcoxon_signed_rank([1.5] * (n - 1) + [2.0]).p_value
    assert smallest_exact_p(5) > 0.05 > smallest_exact_p(6)
    with pytest.raises(ValueError, match="at least one"):
        smallest_exact_p(0)


def test_paired_comparison_counts_wins_ties_and_losses() -> None:
    comparison = compare_paired([0.5, 0.0, -1.0, 2.0])
    assert (comparison.wins, comparison.ties, comparison.losses, comparison.settings) == (2, 1, 1, 4)
    assert comparison.median_improvement == 0.25
    assert comparison.test.n == 3
    assert comparison.sentence().startswith("better in 2 of 4 settings (1 ties, 1 worse)")


def test_paired_comparison_needs_a_setting() -> None:
    with pytest.raises(ValueError, match="at least one"):
        compare_paired([])


def test_wilson_interval_matches_known_values_and_stays_inside_zero_one():
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 0)


def test_binomial_tail_is_the_exact_one_sided_probability():
    assert binomial_tail(0, 10, 0.3) == pytest.approx(1.0)
    assert binomial_tail(10, 10, 0.5) == pytest.approx(0.5**10)
    assert binomial_tail(3, 4, 0.5) == pytest.approx(5 / 16)
    with pytest.raises(ValueError):
        binomial_tail(5, 4, 0.5)


def test_mcnemar_exact_counts_only_the_discordant_pairs():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    assert mcnemar_exact(1, 9) == pytest.approx(mcnemar_exact(9, 1)) == pytest.approx(22 / 1024)


def test_holm_multiplies_by_the_remaining_tests_and_never_decreases_along_the_order():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"x": 0.6, "y": 0.5}) == pytest.approx({"y": 1.0, "x": 1.0})
