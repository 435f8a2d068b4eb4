"""ABAB rounds (experiments/bench/rounds.py): a load burst in one round does not move the ratio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "bench"))
from rounds import alternate, ratio_summary  # noqa: E402


def test_sides_alternate_round_by_round() -> None:
    order: list[str] = []
    results = alternate({"a": lambda: order.append("a") or 1.0, "b": lambda: order.append("b") or 2.0}, rounds=3)
    assert order == ["a", "b", "a", "b", "a", "b"] and results == {"a": [1.0] * 3, "b": [2.0] * 3}


def test_a_burst_of_load_in_one_round_leaves_the_median_ratio_alone() -> None:
    plain = [1.0, 1.0, 5.0, 1.0, 1.0]  # round 2 ran on a loaded machine: both sides slowed
    es = [1.1, 1.1, 6.5, 1.1, 1.1]
    figures = ratio_summary("es_over_inference", es, plain)
    assert figures["es_over_inference"] == pytest.approx(1.1)
    assert figures["es_over_inference_min"] == pytest.approx(1.1) and figures["es_over_inference_max"] == pytest.approx(1.3)
    with pytest.raises(ValueError):
        ratio_summary("x", [1.0], [])
