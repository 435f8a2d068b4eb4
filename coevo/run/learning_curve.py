"""The learning curve of a run that plays episodes: the reward training saw each generation, beside
held-out success measured every few generations on episodes training never saw.

One figure serves the report and the experiment scripts, so what a committed plot shows is what a
user's own report shows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from coevo.es.update_log import UpdateRecord
from coevo.run.heldout import SuccessRate
from coevo.stats import wilson_interval


def training_rewards(records: Sequence[UpdateRecord]) -> list[tuple[int, float, float, float]]:
    """(generation, mean, lowest, highest) of the members' raw rewards of each ES update; generation g
    made update g (generation 0 only measures), and invalid members are left out."""
    points = []
    for record in records:
        valid = [r for r in record.raw_rewards if r is not None]
        if valid:
            points.append((record.step + 1, float(np.mean(valid)), min(valid), max(valid)))
    return points


def curve_figure(train: Sequence[tuple[int, float, float, float]], heldout: Sequence[SuccessRate]) -> Figure:
    """Training reward (mean line, member range band) on the left axis; held-out success with its 95%
    Wilson interval on the right, both against generations."""
    figure = Figure(figsize=(10, 3.6))
    reward_axes = figure.subplots()
    if train:
        generations, means, lows, highs = zip(*train, strict=True)
        reward_axes.fill_between(generations, lows, highs, alpha=0.15, color="#1f77b4", label="members' range")
        reward_axes.plot(generations, means, color="#1f77b4", marker="o", markersize=3, label="training reward (mean)")
    reward_axes.set_xlabel("generation")
    reward_axes.set_ylabel("training reward", color="#1f77b4")
    reward_axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    reward_axes.grid(alpha=0.3)
    success_axes = reward_axes.twinx()
    if heldout:
        xs = [m.generation for m in heldout]
        rates = [m.rate for m in heldout]
        bounds = [wilson_interval(m.successes, m.episodes) for m in heldout]
        errors = [
            [r - low for r, (low, _) in zip(rates, bounds, strict=True)],
            [high - r for r, (_, high) in zip(rates, bounds, strict=True)],
        ]
        split, episodes = heldout[0].split, heldout[0].episodes
        success_axes.errorbar(
            xs,
            rates,
            yerr=errors,
            color="#d62728",
            marker="s",
            capsize=3,
            label=f"{split} success ({episodes} episodes, 95% CI)",
        )
    success_axes.set_ylabel("held-out success", color="#d62728")
    success_axes.set_ylim(0, 1)
    handles = [h for axes in (reward_axes, success_axes) for h in axes.get_legend_handles_labels()[0]]
    if handles:
        reward_axes.legend(handles=handles, loc="upper left", fontsize="small")
    figure.tight_layout()
    return figure
