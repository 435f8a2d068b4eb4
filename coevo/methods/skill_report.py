"""The skill methods' section of report.html (`coevo.methods.skill_method`): the library held-out success
was measured with, its edits generation by generation, and each skill's credit and uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coevo.run.heldout import heldout_lines
from coevo.run.report_html import escaped, table
from coevo.run.report_section import ReportSection
from coevo.skills.timeline import library_history

if TYPE_CHECKING:
    from coevo.run.store import RunStore
    from coevo.skills.library import Library


def skill_library(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Held-out success with the library it was measured with, the library's edits generation by
    generation, and each skill's credit and uses as they stood after every generation; None for a run
    that kept no library (`coevo` without `settings.library`)."""
    history = library_history(store.states())
    if not history:
        return None
    lines = "".join(f"<li>{escaped(line)}</li>" for line in heldout_lines(store.heldout_figures()))
    measured = f"<h3>Held-out success</h3><ul>{lines}</ul>" if lines else ""
    changes = table(
        (
            (
                at.generation,
                len(at.library),
                ", ".join(at.added) or "-",
                ", ".join(at.removed) or "-",
                "; ".join(f"{e.op}: {e.summary}" for e in at.edits) or "-",
            )
            for at in history
        ),
        ("generation", "skills", "added", "removed", "edits (add, replace-section, merge, delete)"),
    )
    names = sorted({name for at in history for name in at.library})

    def cell(library: Library, name: str) -> str:
        if name not in library:
            return "-"
        meta = library[name].meta
        credit = "no estimate" if meta.credit is None else f"{meta.credit:+.3g}"
        return f"{credit} ({meta.uses} uses)"

    credit = table(
        ((name, *(cell(at.library, name) for at in history)) for name in names),
        ("skill", *(f"gen {at.generation}" for at in history)),
    )
    note = (
        '<p class="note">Credit: mean reward of the members shown the skill minus that of the members '
        "not shown it, averaged over the generations that had both.</p>"
    )
    return measured + "<h3>Changes</h3>" + changes + "<h3>Credit and uses</h3>" + note + credit


SKILL_LIBRARY = ReportSection("Skill library", skill_library)
