"""Per-skill credit: the mean reward of the members that were shown the skill, over its uses.

Rendering under a token budget decides which skills each member sees, so a skill's credit is read off
the rewards of exactly those members. It is a running mean over the generations that showed it (its
`uses`), which `by_credit` then uses to put the skills that went with higher rewards first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from coevo.skills.library import Library
from coevo.workload import Evaluation


def credited(library: Library, shown: Iterable[str], evaluations: Sequence[Evaluation]) -> Library:
    """`library` after one more use of each `shown` skill (uses already counted) by members scored
    `evaluations`: each skill's credit moves to the running mean of its members' mean rewards."""
    rewards = [e.reward for e in evaluations if e.reward is not None]
    shown = set(shown)
    if not rewards or not shown:
        return library
    mean = sum(rewards) / len(rewards)
    skills = []
    for name, skill in library.items():
        if name in shown:
            previous, uses = skill.meta.credit, max(skill.meta.uses, 1)
            skill = skill.with_meta(credit=mean if previous is None else previous + (mean - previous) / uses)
        skills.append(skill)
    return library.replacing(skills)
