"""A run's skill library over time, read back from its committed step states (for reports).

Each step state of a skill method carries the whole library (`coevo.skills.pinning.library_state`),
so the history needs no log of its own: consecutive states give what was added and removed, the
library's edit log says which bounded edit did it, and each state's bookkeeping gives the credit and
uses the skills had then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coevo.skills.library import EditRecord, Library
from coevo.skills.pinning import library_from_state


@dataclass(frozen=True)
class LibraryAt:
    """The library after one generation, and how it differs from the one before."""

    generation: int
    library: Library
    added: tuple[str, ...]
    removed: tuple[str, ...]
    edits: tuple[EditRecord, ...]
    """The edits applied in this generation (merges and deletions included)."""


def library_history(states: Iterable[dict[str, Any]]) -> list[LibraryAt]:
    """One entry per generation whose step state holds a skill library (the last step of each)."""
    last_of: dict[int, Library] = {}
    for state in states:
        method = state.get("method")
        if isinstance(method, dict) and "library" in method:
            last_of[state["generation"]] = library_from_state(method["library"])
    history, previous = [], Library()
    for generation, library in sorted(last_of.items()):
        seen = len(previous.log)
        history.append(
            LibraryAt(
                generation,
                library,
                tuple(sorted(set(library) - set(previous))),
                tuple(sorted(set(previous) - set(library))),
                library.log[seen:],
            )
        )
        previous = library
    return history
