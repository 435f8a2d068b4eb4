"""A run's skill library in its step state: pinned at step 0, carried with every step, exported to disk.

The run pins the skills it started from by their content hashes; a resumed run re-reads the configured
library and refuses to go on if any skill changed, so a run's result always names the skills it used.
The evolving library travels in the step state (content and bookkeeping), so a resume after any crash
continues from the library of the last committed step.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from coevo.skills.library import EditRecord, Library, load_library, save_library
from coevo.skills.skill import Skill, SkillMeta
from coevo.skills.skill_md import SkillFormatError

RUN_LIBRARY_DIR = "skills"
"""Where a run directory keeps the library it has reached (the one `coevo skills export RUN_DIR` reads)."""


class LibraryChanged(ValueError):
    """The configured starting library is not the one the run pinned; the message is one line."""


def starting_library(path: str | None) -> Library:
    return Library() if path is None else load_library(Path(path))


def pin(library: Library) -> dict[str, str]:
    """Skill name -> content id: what a run records at step 0."""
    return {name: skill.id for name, skill in library.items()}


def check_pin(path: str | None, pinned: dict[str, str]) -> None:
    """Raise LibraryChanged unless the library at `path` still has exactly the pinned skills."""
    try:
        current = pin(starting_library(path))
    except SkillFormatError as exc:
        raise LibraryChanged(f"skills library {path} no longer loads: {exc}") from None
    if current != pinned:
        changed = sorted(set(current.items()) ^ set(pinned.items()))
        raise LibraryChanged(
            f"skills library {path} changed since the run started (skill {changed[0][0]!r}); "
            "restore it or start a new run"
        )


def library_state(library: Library) -> dict[str, Any]:
    return {
        "skills": [
            {
                "skill_md": skill.skill_md,
                "files": {path: base64.b64encode(data).decode() for path, data in skill.files.items()},
                "meta": skill.meta.to_json(),
            }
            for skill in library.values()
        ],
        "log": [record.to_json() for record in library.log],
    }


def library_from_state(state: dict[str, Any]) -> Library:
    skills = (
        Skill(
            item["skill_md"],
            {path: base64.b64decode(data) for path, data in item["files"].items()},
            SkillMeta.from_json(item["meta"]),
        )
        for item in state["skills"]
    )
    return Library(skills, (EditRecord(**record) for record in state["log"]))


def export_to_run_dir(library: Library, run_dir: Path) -> None:
    save_library(library, run_dir / RUN_LIBRARY_DIR)
