"""Render skills into a prompt that never exceeds a token budget.

Tokens are counted on the whole rendered text with the caller's tokenizer (tokenizers do not add up
over pieces), so the budget holds for the exact string the model sees. Without a tokenizer, words
separated by whitespace are counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from coevo.skills.library import Library
from coevo.skills.skill import Skill

TokenCounter = Callable[[str], int]
HEADER = "Skills you may use:\n\n"


def whitespace_tokens(text: str) -> int:
    return len(text.split())


def render_skill(skill: Skill) -> str:
    text = f"## {skill.name}\n{skill.description}\n{skill.body.strip()}\n"
    if skill.code is not None:
        text += f"```python\n{skill.code.rstrip()}\n```\n"
    return text


def by_credit(library: Library) -> list[Skill]:
    """Best estimated skills first; skills without a credit estimate after them, most used first."""
    return sorted(
        library.values(),
        key=lambda s: (s.meta.credit is None, -(s.meta.credit or 0.0), -s.meta.uses, s.name),
    )


def render_prompt(
    skills: Iterable[Skill], budget: int, count_tokens: TokenCounter = whitespace_tokens
) -> tuple[str, list[str]]:
    """(prompt text, names of the skills it shows): skills are taken in order and each one that still
    fits is added; the text is empty when not even one fits."""
    shown: list[str] = []
    text = ""
    for skill in skills:
        candidate = (text or HEADER) + render_skill(skill) + "\n"
        if count_tokens(candidate) <= budget:
            text = candidate
            shown.append(skill.name)
    return text, shown
