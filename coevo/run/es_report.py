"""The ES engine's section of report.html: its sigma and alpha schedules and the raw rewards of every
update, with the members that failed counted apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from coevo.run.report_html import escaped, image
from coevo.run.report_section import ReportSection

if TYPE_CHECKING:
    from coevo.candidate import Candidate
    from coevo.es.update_log import UpdateRecord
    from coevo.run.store import RunStore


def es_plots(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    """The schedules and rewards; a note for a run without an ES update (its method evolves no weights,
    or it has not reached its first update)."""
    records = store.es_records()
    if not records:
        return f'<p class="note">No ES update in this run (method {escaped(config["method"])}).</p>'
    candidates = [c for _, c in store.candidates()]
    return _schedule_plot(records) + _reward_plot(records, invalid_members(records, candidates))


ES_SECTION = ReportSection("ES schedules and rewards", es_plots)


def invalid_members(records: Sequence[UpdateRecord], candidates: Iterable[Candidate]) -> list[int]:
    """Per ES update, its members that failed: no reward (an invalid episode or heuristic), or a
    heuristic written under the member's perturbation that is invalid (told as a penalty reward)."""
    failed = {
        (c.weights.step, c.weights.seed, c.weights.sign)
        for c in candidates
        if not c.valid and c.weights is not None and c.weights.seed is not None
    }
    return [
        sum(
            reward is None or (record.step, seed, sign) in failed
            for reward, seed, sign in zip(record.raw_rewards, record.seeds, record.signs, strict=True)
        )
        for record in records
    ]


def _schedule_plot(records: Sequence[UpdateRecord]) -> str:
    steps = [r.step for r in records]
    figure = Figure(figsize=(10, 3.2))
    sigma_axes, alpha_axes = figure.subplots(1, 2)
    for axes, values, name in (
        (sigma_axes, [r.sigma for r in records], "sigma"),
        (alpha_axes, [r.alpha for r in records], "alpha"),
    ):
        axes.plot(steps, values, marker="o", markersize=3)
        axes.set_xlabel("ES update")
        axes.set_ylabel(name)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
    figure.tight_layout()
    skipped = sum(r.update is None for r in records)
    note = f"{len(records)} ES updates" + (f", {skipped} skipped (every member invalid)." if skipped else ".")
    return image(figure, "sigma and alpha schedules") + f'<p class="note">{note}</p>'


def _reward_plot(records: Sequence[UpdateRecord], invalid: Sequence[int]) -> str:
    """Raw rewards per update as box and strip; invalid members (`invalid_members`) counted in a panel below."""
    figure = Figure(figsize=(10, 5))
    rewards_axes, invalid_axes = figure.subplots(2, 1, sharex=True, height_ratios=(4, 1))
    jitter = np.random.default_rng(0)
    for record in records:
        valid = [r for r in record.raw_rewards if r is not None]
        if valid:
            rewards_axes.boxplot([valid], positions=[record.step], widths=0.6, showfliers=False, manage_ticks=False)
            offsets = jitter.uniform(-0.2, 0.2, len(valid))
            rewards_axes.scatter(record.step + offsets, valid, s=8, alpha=0.6, color="#1f77b4")
    rewards_axes.set_ylabel("raw reward")
    rewards_axes.grid(alpha=0.3)
    steps = [r.step for r in records]
    invalid_axes.bar(steps, invalid, color="#d62728")
    invalid_axes.set_ylabel("invalid")
    invalid_axes.set_xlabel("ES update")
    invalid_axes.set_ylim(0, max(1, *invalid))
    invalid_axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    invalid_axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    members = sum(len(record.raw_rewards) for record in records)
    note = (
        f"{members} members over {len(records)} ES updates, {sum(invalid)} of them invalid (lower panel); an invalid"
        " member that was told a penalty reward is also in the box above."
    )
    return image(figure, "reward distributions per ES update") + f'<p class="note">{note}</p>'
