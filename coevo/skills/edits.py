"""Bounded edits to a skill library, as data: add, replace a section, merge two skills, delete.

A proposer (an LLM reading trajectories) emits these values; gates judge them; `apply_edit` turns one
into a new library and logs it. Keeping edits as small typed values is what lets a gate refuse one, a
buffer remember it, and a log show how a library grew.
"""

from __future__ import annotations

from dataclasses import dataclass

from coevo.skills.library import EditRecord, Library
from coevo.skills.skill import Skill
from coevo.skills.skill_md import replace_section


class EditError(ValueError):
    """An edit that does not apply to this library (an unknown skill, a name taken, a missing section)."""


@dataclass(frozen=True)
class AddSkill:
    skill: Skill

    op = "add"
    adds_lesson = True

    @property
    def sources(self) -> tuple[str, ...]:
        return self.skill.meta.sources

    def describe(self) -> str:
        return f"add {self.skill.kind} skill {self.skill.name!r}: {self.skill.description}"


@dataclass(frozen=True)
class ReplaceSection:
    name: str
    heading: str
    content: str
    sources: tuple[str, ...] = ()
    """The trajectories the new content was drawn from (the recurrence gate counts them)."""

    op = "replace-section"
    adds_lesson = True

    def describe(self) -> str:
        return f"replace section {self.heading!r} of {self.name!r} with: {' '.join(self.content.split())}"


@dataclass(frozen=True)
class MergeSkills:
    """Fold `absorbed` into `kept`: `kept`'s content stays, their bookkeeping is combined."""

    kept: str
    absorbed: str

    op = "merge"
    adds_lesson = False
    sources = ()

    def describe(self) -> str:
        return f"merge {self.absorbed!r} into {self.kept!r}"


@dataclass(frozen=True)
class DeleteSkill:
    name: str

    op = "delete"
    adds_lesson = False
    sources = ()

    def describe(self) -> str:
        return f"delete {self.name!r}"


Edit = AddSkill | ReplaceSection | MergeSkills | DeleteSkill


def apply_edit(library: Library, edit: Edit, generation: int = 0) -> Library:
    """The library after `edit`, with the edit appended to its log; raises EditError if it does not apply."""
    skills = dict(library)
    match edit:
        case AddSkill(skill=skill):
            if skill.name in skills:
                raise EditError(f"a skill named {skill.name!r} already exists")
            skills[skill.name] = skill.with_meta(generation=generation)
        case ReplaceSection(name=name, heading=heading, content=content):
            old = _existing(skills, name)
            try:
                text = replace_section(old.skill_md, heading, content)
            except KeyError:
                raise EditError(f"{name!r} has no section {heading!r}") from None
            sources = tuple(dict.fromkeys(old.meta.sources + edit.sources))
            skills[name] = Skill(text, old.files, old.meta).with_meta(sources=sources)
        case MergeSkills(kept=kept, absorbed=absorbed):
            if kept == absorbed:
                raise EditError(f"cannot merge {kept!r} into itself")
            skills[kept] = _merged(_existing(skills, kept), _existing(skills, absorbed))
            del skills[absorbed]
        case DeleteSkill(name=name):
            _existing(skills, name)
            del skills[name]
    after = Library(skills.values())
    record = EditRecord(generation, edit.op, edit.describe(), library.hash, after.hash)
    return library.replacing(after.values(), library.log + (record,))


def _existing(skills: dict[str, Skill], name: str) -> Skill:
    if name not in skills:
        raise EditError(f"no skill named {name!r}")
    return skills[name]


def _merged(kept: Skill, absorbed: Skill) -> Skill:
    a, b = kept.meta, absorbed.meta
    credits = [(m.credit, max(m.estimates, 1)) for m in (a, b) if m.credit is not None]
    credit = sum(c * w for c, w in credits) / sum(w for _, w in credits) if credits else None
    last_used = max((u for u in (a.last_used, b.last_used) if u is not None), default=None)
    return kept.with_meta(
        sources=tuple(dict.fromkeys(a.sources + b.sources)),
        generation=min(a.generation, b.generation),
        uses=a.uses + b.uses,
        last_used=last_used,
        credit=credit,
        estimates=a.estimates + b.estimates,
    )
