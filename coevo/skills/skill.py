"""A skill: a text procedure (SKILL.md) or a code function (SKILL.md plus python source and its tests).

A skill's id is the hash of its content (every file of its folder), so the same skill has the same id
in every library and a run can pin exactly the skills it started from. What coevo learns about a skill
while using it (provenance, uses, credit) is `SkillMeta`, kept beside the content and outside the id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from coevo.skills.skill_md import FrontMatter, split_skill_md

SKILL_FILE = "SKILL.md"
CODE_FILE = "skill.py"
TESTS_FILE = "test_skill.py"


class SkillKind(StrEnum):
    TEXT = "text"
    CODE = "code"


@dataclass(frozen=True)
class SkillMeta:
    """What a run knows about a skill: where it came from, when it joined, how often it was shown."""

    sources: tuple[str, ...] = ()
    """The trajectories or candidates the lesson was drawn from."""
    weights_id: str | None = None
    """The weights in force when the skill was written."""
    generation: int = 0
    uses: int = 0
    last_used: int | None = None
    credit: float | None = None
    """The estimated effect of showing the skill (mean reward shown minus not shown); None until estimated."""
    estimates: int = 0
    """Generations whose members gave the credit a contrast (some shown the skill, some not)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": list(self.sources),
            "weights_id": self.weights_id,
            "generation": self.generation,
            "uses": self.uses,
            "last_used": self.last_used,
            "credit": self.credit,
            "estimates": self.estimates,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SkillMeta:
        return cls(
            sources=tuple(data.get("sources", ())),
            weights_id=data.get("weights_id"),
            generation=int(data.get("generation", 0)),
            uses=int(data.get("uses", 0)),
            last_used=data.get("last_used"),
            credit=data.get("credit"),
            estimates=int(data.get("estimates", 0)),
        )


@dataclass(frozen=True)
class Skill:
    """One skill folder's content. `files` holds every file but SKILL.md (relative posix path ->
    bytes): for a code skill, its source and tests; for any skill, extra files loaded on demand."""

    skill_md: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    meta: SkillMeta = SkillMeta()

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", MappingProxyType(dict(sorted(self.files.items()))))
        object.__setattr__(self, "_front", split_skill_md(self.skill_md)[0])
        if (CODE_FILE in self.files) != (TESTS_FILE in self.files):
            raise ValueError(f"a code skill needs both {CODE_FILE} and {TESTS_FILE}")

    @classmethod
    def code_skill(cls, skill_md: str, code: str, tests: str, meta: SkillMeta = SkillMeta()) -> Skill:
        return cls(skill_md, {CODE_FILE: code.encode(), TESTS_FILE: tests.encode()}, meta)

    @property
    def front(self) -> FrontMatter:
        return self._front  # type: ignore[attr-defined]

    @property
    def name(self) -> str:
        return self.front.name

    @property
    def description(self) -> str:
        return self.front.description

    @property
    def body(self) -> str:
        return split_skill_md(self.skill_md)[1]

    @property
    def kind(self) -> SkillKind:
        return SkillKind.CODE if CODE_FILE in self.files else SkillKind.TEXT

    @property
    def code(self) -> str | None:
        return self.files[CODE_FILE].decode() if self.kind is SkillKind.CODE else None

    @property
    def tests(self) -> str | None:
        return self.files[TESTS_FILE].decode() if self.kind is SkillKind.CODE else None

    @property
    def id(self) -> str:
        """SHA-256 of the folder's content: SKILL.md and each file, with its path."""
        digest = hashlib.sha256()
        for path, data in (("SKILL.md", self.skill_md.encode()), *self.files.items()):
            for part in (path.encode(), data):
                digest.update(len(part).to_bytes(8, "big"))
                digest.update(part)
        return digest.hexdigest()

    def with_meta(self, **changes: Any) -> Skill:
        return replace(self, meta=replace(self.meta, **changes))
