"""A section of report.html that a plugin contributes: the report knows what every run has, and asks
the run's method and workload classes (their `report_sections`) for what only they make.

A section renders from the run store alone, so it works for a finished, interrupted or still running
run, and says None where the run has none of its artefact (the page then leaves it out). It builds its
HTML with `coevo.run.report_html`, which escapes what came from the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from coevo.run.store import RunStore

Render = Callable[["RunStore", dict[str, Any], dict[str, Any]], "str | None"]
"""(the run's store, its stored config, its last step state ({} before the first)) -> the section's
HTML body, or None where the run has nothing for it."""


@dataclass(frozen=True)
class ReportSection:
    """A titled part of report.html and the function that renders its body."""

    title: str
    render: Render
    place: Literal["plots", "details"] = "details"
    """plots: beside the run's plots, after the objective and the ES schedules; details: at the end of
    the page, after the lineage (the method's sections first, then the workload's)."""
