"""The SKILL.md convention: YAML front matter (`name`, `description`), then a markdown body.

The text is kept exactly as read; parsing only looks at it, so writing a skill back out leaves its
SKILL.md byte for byte identical. Sections are the body's markdown headings, the unit a bounded edit
replaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

NAME_MAX = 64
DESCRIPTION_MAX = 1024
NAME_PATTERN = re.compile(r"[a-z0-9-]+")
_FENCE = re.compile(r"^---[ \t]*\r?\n", re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*\r?$", re.MULTILINE)


class SkillFormatError(ValueError):
    """A SKILL.md (or skill folder) that does not follow the convention; the message is one line."""


@dataclass(frozen=True)
class FrontMatter:
    name: str
    description: str


def split_skill_md(text: str) -> tuple[FrontMatter, str]:
    """(front matter, body) of a SKILL.md; raises SkillFormatError naming what is wrong."""
    opening = _FENCE.match(text)
    if opening is None:
        raise SkillFormatError("does not start with a '---' front matter line")
    closing = _FENCE.search(text, opening.end())
    if closing is None:
        raise SkillFormatError("front matter has no closing '---' line")
    try:
        fields = yaml.safe_load(text[opening.end() : closing.start()])
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"front matter is not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(fields, dict):
        raise SkillFormatError("front matter is not a mapping of keys to values")
    return FrontMatter(_valid_name(fields.get("name")), _valid_description(fields.get("description"))), text[
        closing.end() :
    ]


def compose_skill_md(front: FrontMatter, body: str) -> str:
    """A new SKILL.md from its parts (for skills written by coevo, not read from disk)."""
    header = yaml.safe_dump({"name": front.name, "description": front.description}, sort_keys=False, width=10**6)
    return f"---\n{header}---\n{body}"


def replace_section(text: str, heading: str, content: str) -> str:
    """`text` with the section under `heading` (up to the next heading of the same or a higher level)
    replaced by `content`; the heading line and everything outside the section stay byte-identical."""
    headings = list(_HEADING.finditer(text, _body_start(text)))
    for index, match in enumerate(headings):
        if match.group(2) != heading:
            continue
        level = len(match.group(1))
        end = next((m.start() for m in headings[index + 1 :] if len(m.group(1)) <= level), len(text))
        line_end = text.find("\n", match.end())
        start = len(text) if line_end == -1 else line_end + 1
        if content and not content.endswith("\n") and end < len(text):
            content += "\n"
        return text[:start] + content + text[end:]
    raise KeyError(heading)


def _body_start(text: str) -> int:
    opening = _FENCE.match(text)
    closing = _FENCE.search(text, opening.end()) if opening else None
    return closing.end() if closing else 0


def _valid_name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise SkillFormatError("front matter lacks a 'name' string")
    if len(value) > NAME_MAX or not NAME_PATTERN.fullmatch(value):
        raise SkillFormatError(f"name {value[:80]!r} must be at most {NAME_MAX} characters of [a-z0-9-]")
    return value


def _valid_description(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SkillFormatError("front matter lacks a 'description' string")
    if len(value) > DESCRIPTION_MAX:
        raise SkillFormatError(f"description has {len(value)} characters, more than {DESCRIPTION_MAX}")
    return value
