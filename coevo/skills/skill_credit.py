"""Per-skill credit: each skill's estimated effect on reward, against the members not shown it.

Design: every generation each skill is shown to a balanced random half of the members (`shown_to`).
A seeded shuffle of the member indices per (run seed, generation, skill) picks them, so what member k
sees depends only on its index, never on call order or batch size, and a resumed or remote run draws
the same subsets. Halves rather than independent coin flips: with a handful of members a coin can show
a skill to everyone (no contrast, no estimate), a half never does. Halves rather than leave-one-out:
each member's reward then informs every skill's estimate, where leave-one-out gives each skill a
single member without it. The cost is that a member plays with about half the library; the held-out
gate and the final measurement use all of it.

The effect of one generation is `coevo.credit_split.effects_against_absence` (the N-skill form of the AHD
variant split), and a skill's credit is the running mean of its per-generation effects.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence, Set

from coevo.credit_split import effects_against_absence
from coevo.skills.library import Library


def shown_to(names: Sequence[str], members: int, seed: int, generation: int, share: float) -> list[frozenset[str]]:
    """Which of `names` each of `members` members is shown: each skill to `round(share * members)` of
    them (at least one, and one fewer than all when there are two or more members and share < 1)."""
    subsets: list[set[str]] = [set() for _ in range(members)]
    for name in names:
        count = members if share >= 1 else min(max(round(share * members), 1), max(members - 1, 1))
        order = list(range(members))
        random.Random(_digest(f"{seed}:skills:{generation}:{name}")).shuffle(order)
        for index in order[:count]:
            subsets[index].add(name)
    return [frozenset(s) for s in subsets]


def credited(library: Library, shown: Sequence[Set[str]], rewards: Sequence[float]) -> Library:
    """`library` after one generation whose member i, shown `shown[i]`, earned `rewards[i]`: each skill
    with a contrast that generation moves its credit to the running mean of its effects."""
    effects = effects_against_absence(shown, rewards)
    skills = []
    for name, skill in library.items():
        if name in effects:
            previous, count = skill.meta.credit, skill.meta.estimates + 1
            credit = effects[name] if previous is None else previous + (effects[name] - previous) / count
            skill = skill.with_meta(credit=credit, estimates=count)
        skills.append(skill)
    return library.replacing(skills)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
