"""Held-out success of an agent run: the live weights on the val or test split, before and after training.

Selection only ever sees search episodes; whether ES (or GRPO) taught the agent anything is decided on a
split it never trained on. The base weights are measured when the run starts (generation 0) and the trained ones
when it ends, both with the same sampling seeds; both travel in the runner's step state
(`Runner.record_heldout`), so a resumed run still compares against its own start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coevo.stats import wilson_interval
from coevo.workload import EpisodeWorkload, Member


@dataclass(frozen=True)
class SuccessRate:
    split: str
    successes: int
    episodes: int
    updates: str
    """What the measured weights had received, in the method's words ("2 ES updates", "3 GRPO steps")."""
    library: str | None = None
    """The skill library shown with every observation (hash and skill names); None: no text."""
    generation: int | None = None
    """Generations the run had finished when measured (0: the base weights)."""
    seeds: tuple[int, ...] = ()
    """The episodes' instance seeds, in order, so two measurements pair episode by episode."""
    outcomes: tuple[int, ...] = ()
    """1 where the episode of the same position in `seeds` was solved, else 0."""
    llm_calls: int = 0
    """The policy's turns over the measured episodes, one LLM call each."""

    @property
    def rate(self) -> float:
        return self.successes / self.episodes

    def line(self, label: str) -> str:
        low, high = wilson_interval(self.successes, self.episodes)
        shown = "" if self.library is None else f", library {self.library}"
        return (
            f"{label} ({self.updates}{shown}) success on {self.split}: {self.rate:.3f} "
            f"({self.successes}/{self.episodes}; 95% CI {low:.3f}-{high:.3f})"
        )


def heldout_success(
    workload: EpisodeWorkload, shown: tuple[Member, str] | None, updates: str, generation: int | None = None
) -> SuccessRate:
    """The live weights' success rate on the workload's held-out episodes, with the text `shown` (a
    skill method: its whole library as it stands, and its name; the others: none). `updates` says what
    the weights have received, `generation` how far the run was."""
    played = workload.heldout_episodes(Member("") if shown is None else shown[0])
    library = None if shown is None else shown[1]
    outcomes = tuple(int(e.success) for e in played)
    seeds = tuple(e.seed for e in played)
    turns = sum(len(e.turns) for e in played)
    return SuccessRate(
        workload.heldout, sum(outcomes), len(played), updates, library, generation, seeds, outcomes, turns
    )


def measured_curve(heldout: dict[str, dict[str, Any]]) -> list[SuccessRate]:
    """Every held-out measurement of a run (a runner's `heldout`) that says when it was taken, in order."""
    figures = [SuccessRate(**data) for data in heldout.values()]
    return sorted((f for f in figures if f.generation is not None), key=lambda f: f.generation)


def heldout_lines(heldout: dict[str, dict[str, Any]]) -> list[str]:
    """Before and after (a runner's `heldout`), each with its interval, and the change in points."""
    figures = {when: SuccessRate(**data) for when, data in heldout.items() if when in ("before", "after")}
    lines = [figures[when].line(label) for when, label in (("before", "base"), ("after", "trained")) if when in figures]
    if {"before", "after"} <= figures.keys():
        change = 100 * (figures["after"].rate - figures["before"].rate)
        after = figures["after"]
        changed = after.updates if after.library is None else f"the run ({after.updates} and the skill library)"
        lines.append(f"{changed} changed held-out success by {change:+.1f} percentage points")
    return lines
