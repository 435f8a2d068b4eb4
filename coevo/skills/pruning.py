"""Find skills that say the same thing, merge them, and prune skills nobody has used for a while.

Duplicate skills pile up when each trajectory's analysis writes its own (a complaint users of skill
methods report). Text skills are compared on their normalised text (case, punctuation and spacing
dropped); code skills on coevo's AST fingerprint, so helpers that differ only in names, comments or
docstrings are one skill.
"""

from __future__ import annotations

import re

from coevo.operators.fingerprint import code_fingerprint
from coevo.skills.edits import DeleteSkill, MergeSkills, apply_edit
from coevo.skills.library import Library
from coevo.skills.skill import Skill

_NON_WORD = re.compile(r"[\W_]+")


def normalised_text(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def duplicate_key(skill: Skill) -> str:
    """Equal for skills that are duplicates of each other."""
    if skill.code is not None:
        try:
            return "code:" + code_fingerprint(skill.code)
        except ValueError:  # unparsable code is only ever a duplicate of the same bytes
            return "code-bytes:" + skill.id
    return "text:" + normalised_text(skill.body)


def merge_duplicates(library: Library, generation: int = 0) -> Library:
    """Merge each group of duplicates into its most used member (then the earliest, then by name)."""
    groups: dict[str, list[Skill]] = {}
    for skill in library.values():
        groups.setdefault(duplicate_key(skill), []).append(skill)
    for group in groups.values():
        kept, *absorbed = sorted(group, key=lambda s: (-s.meta.uses, s.meta.generation, s.name))
        for skill in absorbed:
            library = apply_edit(library, MergeSkills(kept.name, skill.name), generation)
    return library


def stale_skills(library: Library, generation: int, unused_for: int) -> list[str]:
    """Names of skills neither used nor added in the last `unused_for` generations."""
    return [
        name
        for name, skill in library.items()
        if generation - (skill.meta.last_used if skill.meta.last_used is not None else skill.meta.generation)
        >= unused_for
    ]


def prune_unused(library: Library, generation: int, unused_for: int) -> Library:
    """The library without its stale skills, each removal logged as a delete."""
    for name in stale_skills(library, generation, unused_for):
        library = apply_edit(library, DeleteSkill(name), generation)
    return library
