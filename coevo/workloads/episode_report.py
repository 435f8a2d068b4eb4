"""The sections of report.html an episode workload (`coevo.workloads.agents`) owns: the learning curve
(held-out success measured along the run beside the rewards training saw) and each generation's best,
median and worst episode, turn by turn."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from coevo.run.heldout import measured_curve
from coevo.run.report_html import escaped, image, table
from coevo.run.report_section import ReportSection

if TYPE_CHECKING:
    from coevo.run.store import RunStore, StoredTrajectory


def learning_curve(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Held-out success against generations, over the members' training rewards; None before a
    measurement that says when it was taken."""
    # Imported here, not at the top: the agent workload imports this module in every run and every Ray
    # worker, and only a report draws, so only a report should pay for importing matplotlib.
    from coevo.run.learning_curve import curve_figure, training_rewards

    heldout = measured_curve(store.heldout_figures())
    if not heldout:
        return None
    train = training_rewards(store.es_records())
    note = (
        f"Held-out success measured {len(heldout)} times on the same {heldout[0].episodes} {heldout[0].split}"
        " episodes (set `workload.heldout_every` for more points); training rewards are the members' own, on"
        " each generation's search episodes."
    )
    return image(curve_figure(train, heldout), "learning curve") + f'<p class="note">{note}</p>'


def shown_episodes(stored: Iterable[StoredTrajectory]) -> dict[int, list[tuple[str, StoredTrajectory]]]:
    """Per generation, its best, median and worst episode by reward; one picked twice is shown once."""
    by_generation: dict[int, list[StoredTrajectory]] = defaultdict(list)
    for item in stored:
        by_generation[item.generation].append(item)
    shown = {}
    for generation, items in sorted(by_generation.items()):
        ranked = sorted(items, key=lambda item: item.trajectory.reward, reverse=True)  # stable: ties keep their order
        picks: dict[int, str] = {}
        for label, index in (("best", 0), ("median", (len(ranked) - 1) // 2), ("worst", len(ranked) - 1)):
            picks.setdefault(index, label)
        shown[generation] = [(label, ranked[index]) for index, label in picks.items()]
    return shown


def episodes(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Each generation's best, median and worst episode, turn by turn; None before one is stored."""
    stored = store.trajectories()
    if not stored:
        return None
    blocks = []
    for generation, picks in shown_episodes(stored).items():
        blocks.append(f"<h3>Generation {generation}</h3>")
        for label, item in picks:
            episode = item.trajectory
            summary = (
                f"{label}: reward {episode.reward:.4g} on {episode.instance}, {len(episode.turns)} turns"
                f" (candidate {item.candidate})"
            )
            turns = [
                (index, turn.observation, turn.action, turn.reward, turn.tokens)
                for index, turn in enumerate(episode.turns, start=1)
            ]
            turn_table = table(turns, ("turn", "observation", "action", "reward", "tokens"))
            blocks.append(
                f'<details><summary>{escaped(summary)}</summary><div class="episode">{turn_table}</div></details>'
            )
    note = f"{len(stored)} episodes stored; each generation's best, median and worst by reward are shown."
    return f'<p class="note">{note}</p>' + "".join(blocks)


EPISODE_SECTIONS = (
    ReportSection("Learning curve", learning_curve, place="plots"),
    ReportSection("Episodes", episodes),
)
"""What any workload that plays episodes can declare as its `report_sections`."""
