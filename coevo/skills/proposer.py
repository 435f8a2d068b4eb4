"""Edits from failed trajectories: one LLM analysis per trajectory, merged into a few bounded edits.

Each analysis names one lesson (a skill name, a one-line description, the procedure). Analyses naming
the same skill are merged into one edit whose sources are all their trajectories, which is what lets
the recurrence gate tell a lesson seen once from one that keeps coming back. Edits the gates refused
before are shown to the proposer, so it does not spend calls proposing them again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from coevo.llm.base import LLM, SamplingParams
from coevo.operators.records import TextProposal
from coevo.skills.edits import AddSkill, Edit, ReplaceSection
from coevo.skills.gates import RefusedBuffer
from coevo.skills.library import Library
from coevo.skills.skill import Skill, SkillMeta
from coevo.skills.skill_md import NAME_PATTERN, FrontMatter, compose_skill_md
from coevo.workload import Trajectory

LESSON_HEADING = "Procedure"
ANALYSIS_OPERATOR = "skill-analysis"
TURNS_SHOWN = 8
_FIELD = re.compile(r"^\s*(name|description|lesson)\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Analysis:
    """What one failed trajectory taught: the lesson, under the skill name it belongs to."""

    source: str
    name: str
    description: str
    lesson: str


def analysis_prompt(library_text: str, refused: str, trajectory: Trajectory) -> str:
    turns = "\n".join(
        f"Observation: {t.observation}\nAction: {t.action.strip()}\nReward: {t.reward}"
        for t in trajectory.turns[-TURNS_SHOWN:]
    )
    return (
        "An agent failed this episode (final reward "
        f"{trajectory.reward}).\n\n{turns}\n\n"
        f"{library_text or 'The agent had no skills.'}\n{refused}\n"
        "Write one reusable lesson that would have avoided the failure, as exactly three lines:\n"
        "name: <a short lowercase-hyphenated skill name>\n"
        "description: <one sentence: when the lesson applies>\n"
        "lesson: <what to do, in one or two sentences>"
    )


def parse_analysis(source: str, text: str) -> Analysis | None:
    """The three fields of an answer, or None when one is missing or the name is not a skill name."""
    fields = {key.lower(): value.strip() for key, value in _FIELD.findall(text)}
    name = fields.get("name", "").strip("`'\" ").lower()
    if not (NAME_PATTERN.fullmatch(name) and len(name) <= 64 and fields.get("description") and fields.get("lesson")):
        return None
    return Analysis(source, name, fields["description"], fields["lesson"])


def merge_analyses(library: Library, analyses: Sequence[Analysis], max_edits: int) -> list[Edit]:
    """One edit per skill name, the most often seen names first: a new skill, or a new procedure for
    an existing one; each edit's sources are every trajectory that named it."""
    groups: dict[str, list[Analysis]] = {}
    for analysis in analyses:
        groups.setdefault(analysis.name, []).append(analysis)
    ranked = sorted(groups.values(), key=lambda group: (-len({a.source for a in group}), group[0].name))
    edits: list[Edit] = []
    for group in ranked[:max_edits]:
        first, sources = group[0], tuple(dict.fromkeys(a.source for a in group))
        if first.name in library:
            edits.append(ReplaceSection(first.name, LESSON_HEADING, first.lesson + "\n", sources))
        else:
            text = compose_skill_md(FrontMatter(first.name, first.description), f"# {LESSON_HEADING}\n{first.lesson}\n")
            edits.append(AddSkill(Skill(text, meta=SkillMeta(sources=sources))))
    return edits


@dataclass
class EditProposer:
    llm: LLM
    sampling: SamplingParams
    analyses: int = 4
    max_edits: int = 2

    def propose(
        self,
        library: Library,
        library_text: str,
        failed: Sequence[tuple[str, Trajectory]],
        refused: RefusedBuffer,
    ) -> tuple[list[Edit], list[TextProposal]]:
        """Edits from up to `analyses` failed (source id, trajectory) pairs, in one batch of calls,
        and the calls themselves (for the run's record of LLM calls)."""
        chosen = list(failed[: self.analyses])
        if not chosen:
            return [], []
        shown_refusals = refused.render()
        requests = [
            [{"role": "user", "content": analysis_prompt(library_text, shown_refusals, trajectory)}]
            for _, trajectory in chosen
        ]
        answers = self.llm.generate(requests, self.sampling)
        parsed = [parse_analysis(source, answer.text) for (source, _), answer in zip(chosen, answers, strict=True)]
        calls = [
            TextProposal(answer.text, ANALYSIS_OPERATOR, request, answer, (source,))
            for (source, _), request, answer in zip(chosen, requests, answers, strict=True)
        ]
        return merge_analyses(library, [a for a in parsed if a is not None], self.max_edits), calls

