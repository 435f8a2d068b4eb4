"""ABAB rounds: benchmark ratios that hold on a busy machine.

A ratio of two timings taken in separate stretches of time absorbs whatever load arrived during one
of them. Measuring every side once per short round, side after side (A B A B ...), exposes both sides
of each round to the same load; the median of the per-round ratios then ignores the odd disturbed
round, and their range (min, max) shows how much the load moved them.

    samples = alternate({"plain": plain_run, "es": es_run}, rounds=8)
    figures = ratio_summary("es_over_inference", samples["es"], samples["plain"])
    # {"es_over_inference": median, "es_over_inference_min": ..., "es_over_inference_max": ...}
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import median
from typing import TypeVar

T = TypeVar("T")


def alternate(sides: Mapping[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Run each side once per round, in the given order, for `rounds` rounds; each side's results,
    one per round, so result i of every side comes from the same round."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    results: dict[str, list[T]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, side in sides.items():
            results[name].append(side())
    return results


def ratio_summary(name: str, numerators: Sequence[float], denominators: Sequence[float]) -> dict[str, float]:
    """The median of the per-round ratios numerators[i] / denominators[i] under `name`, and their
    range under `name_min` and `name_max`."""
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("ratio_summary needs one numerator per denominator, at least one round")
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True)]
    return {name: median(ratios), f"{name}_min": min(ratios), f"{name}_max": max(ratios)}


COMPARE: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, "<": operator.lt}


def target_line(name: str, value: float, targets: Mapping[str, tuple[str, float]]) -> str:
    """One table row: the figure, and its target with a verdict when `targets` names one."""
    line = f"{name:36s} {value:12.4g}"
    if name in targets:
        relation, bound = targets[name]
        verdict = "ok" if COMPARE[relation](value, bound) else "MISSED"
        line += f"   target {relation} {bound:<5g} {verdict}"
    return line


def cpu_name() -> str:
    """This machine's CPU model: a speed figure is as much the machine's as the code's."""
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"
