"""A skill library: an immutable value (skills by name, plus the log of edits that made it), stored as
a directory of skill folders in the SKILL.md layout.

On disk each folder is `<name>/SKILL.md` plus its files (a code skill's `skill.py` and
`test_skill.py`); coevo's bookkeeping for the skill sits beside them in `coevo.json`, and the edit
log in the library's `edits.jsonl`. Files are read and written as bytes, so a library written back
out is byte-identical to the one read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from coevo.skills.skill import SKILL_FILE, Skill, SkillMeta
from coevo.skills.skill_md import SkillFormatError

META_FILE = "coevo.json"
LOG_FILE = "edits.jsonl"
_IGNORED_PARTS = {"__pycache__", ".pytest_cache"}


@dataclass(frozen=True)
class EditRecord:
    """One applied edit, as the library's log keeps it: enough to audit, not to replay."""

    generation: int
    op: str
    summary: str
    before: str
    after: str

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "op": self.op, "summary": self.summary, "before": self.before, "after": self.after}


class Library(Mapping[str, Skill]):
    """Skills by name (a name is unique: a skill folder is named after it). Never changes in place:
    edits and bookkeeping return a new library."""

    def __init__(self, skills: Iterable[Skill] = (), log: Iterable[EditRecord] = ()) -> None:
        by_name: dict[str, Skill] = {}
        for skill in skills:
            if skill.name in by_name:
                raise ValueError(f"two skills are named {skill.name!r}")
            by_name[skill.name] = skill
        self._skills = MappingProxyType(dict(sorted(by_name.items())))
        self.log: tuple[EditRecord, ...] = tuple(log)

    def __getitem__(self, name: str) -> Skill:
        return self._skills[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._skills)

    def __len__(self) -> int:
        return len(self._skills)

    def __repr__(self) -> str:
        return f"Library({list(self._skills)}, hash={self.hash[:12]})"

    @property
    def hash(self) -> str:
        """SHA-256 of the skills' ids: what a run pins. Bookkeeping (uses, credit) does not change it."""
        return hashlib.sha256("\n".join(f"{name} {skill.id}" for name, skill in self.items()).encode()).hexdigest()

    def replacing(self, skills: Iterable[Skill], log: Iterable[EditRecord] | None = None) -> Library:
        return Library(skills, self.log if log is None else log)

    def with_uses(self, names: Iterable[str], generation: int) -> Library:
        """The library after the named skills were shown once more in `generation`."""
        shown = set(names)
        unknown = shown - set(self)
        if unknown:
            raise KeyError(f"no skills named {sorted(unknown)}")
        return self.replacing(
            skill.with_meta(uses=skill.meta.uses + 1, last_used=generation) if name in shown else skill
            for name, skill in self.items()
        )


def load_library(directory: Path) -> Library:
    """Every skill folder under `directory` (itself one, or its subfolders with a SKILL.md); raises
    SkillFormatError naming the first SKILL.md that breaks the convention."""
    if not directory.is_dir():
        raise SkillFormatError(f"{directory}: not a directory")
    folders = [directory] if (directory / SKILL_FILE).is_file() else sorted(
        path.parent for path in directory.glob(f"*/{SKILL_FILE}")
    )
    log_path = directory / LOG_FILE
    log = [EditRecord(**json.loads(line)) for line in log_path.read_text().splitlines()] if log_path.is_file() else []
    return Library((load_skill(folder) for folder in folders), log)


def load_skill(folder: Path) -> Skill:
    """The skill in `folder` (which may be named otherwise; it is written back under the skill's name)."""
    skill_path = folder / SKILL_FILE
    try:
        text = skill_path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError(f"{skill_path}: not UTF-8 text") from None
    files = {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name not in (SKILL_FILE, META_FILE) and not _IGNORED_PARTS & set(path.parts)
    }
    meta_path = folder / META_FILE
    meta = SkillMeta.from_json(json.loads(meta_path.read_text())) if meta_path.is_file() else SkillMeta()
    try:
        skill = Skill(text, files, meta)
    except (SkillFormatError, ValueError) as exc:
        raise SkillFormatError(f"{skill_path}: {exc}") from None
    return skill


def save_library(library: Library, directory: Path) -> None:
    """Write `library` to `directory`: one folder per skill; skill folders it no longer holds are
    removed (other files are left alone)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(f"*/{SKILL_FILE}"):
        if stale.parent.name not in library:
            shutil.rmtree(stale.parent)
    for name, skill in library.items():
        folder = directory / name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        (folder / SKILL_FILE).write_bytes(skill.skill_md.encode("utf-8"))
        for relative, data in skill.files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_bytes(data)
        (folder / META_FILE).write_text(json.dumps(skill.meta.to_json(), indent=2) + "\n")
    log_path = directory / LOG_FILE
    if library.log:
        log_path.write_text("".join(json.dumps(record.to_json()) + "\n" for record in library.log))
    elif log_path.exists():
        log_path.unlink()
