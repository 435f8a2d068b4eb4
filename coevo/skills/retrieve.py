"""Skill retrieval: the top-k skills by lexical relevance to an instance's text.

BM25 over each skill's name and description (what the SKILL.md convention says a skill is *for*)
against the observation: cheap, deterministic, no model or download. Skills that share no word with
the observation score 0 and are never retrieved, so an instance the library knows nothing about gets
no skill text at all.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from coevo.skills.skill import Skill

K1 = 1.2
B = 0.75
_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset("a an and are as at be by for from if in is it of on or the then to when with you your".split())
"""Words too common in prompts to tell skills apart."""


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words but stop words; a skill name's hyphens separate words."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def relevance(skills: Sequence[Skill], query: str) -> list[float]:
    """BM25 score of each skill's name and description for `query` (the skills are the corpus)."""
    documents = [Counter(words(f"{s.name} {s.description}")) for s in skills]
    if not documents:
        return []
    average = sum(sum(d.values()) for d in documents) / len(documents) or 1.0
    terms = set(words(query))
    frequency = {t: sum(t in d for d in documents) for t in terms}
    scores = []
    for document in documents:
        length = sum(document.values())
        score = 0.0
        for term in terms:
            tf = document[term]
            if tf:
                idf = math.log(1 + (len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        scores.append(score)
    return scores


def retrieved(skills: Sequence[Skill], query: str, k: int) -> list[Skill]:
    """The `k` skills most relevant to `query`, best first (ties keep the given order); none that score 0."""
    scores = relevance(skills, query)
    ranked = sorted(range(len(skills)), key=lambda i: -scores[i])
    return [skills[i] for i in ranked[:k] if scores[i] > 0]
