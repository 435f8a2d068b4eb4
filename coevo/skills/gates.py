"""Gates an edit must pass before the library keeps it, and the buffer of edits they refused.

Skill methods fail in known ways: a lesson written after one sighting competes with real ones, a code
helper that does not work poisons every heuristic that calls it, and an edit that reads well can still
lower the score. Each gate answers one of these; a refused edit is remembered so that the proposer is
shown it and does not propose it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from coevo.skills.edits import AddSkill, Edit, EditError, apply_edit
from coevo.skills.library import Library
from coevo.skills.skill import SkillKind


class Gate(Protocol):
    name: str

    def check(self, library: Library, edit: Edit) -> str | None:
        """Why `edit` must not be applied to `library`, or None to let it through."""


@dataclass(frozen=True)
class RecurrenceGate:
    """A lesson (a new skill or new section text) must have been seen in `min_sources` trajectories."""

    min_sources: int = 2
    name: str = "recurrence"

    def check(self, library: Library, edit: Edit) -> str | None:
        seen = len(set(edit.sources))
        if edit.adds_lesson and seen < self.min_sources:
            return f"seen in {seen} trajectories, fewer than {self.min_sources}"
        return None


@dataclass(frozen=True)
class CodeTestResult:
    passed: bool
    detail: str = ""


class CodeTestRunner(Protocol):
    """Runs a code skill's tests against its source, isolated from the caller (the hook a method fills:
    coevo's task Evaluator scores heuristics on task instances and cannot run arbitrary test files)."""

    def __call__(self, code: str, tests: str) -> CodeTestResult: ...


@dataclass(frozen=True)
class CodeTestGate:
    """A new code skill is kept only if its own tests pass."""

    run_tests: CodeTestRunner
    name: str = "tests"

    def check(self, library: Library, edit: Edit) -> str | None:
        if not (isinstance(edit, AddSkill) and edit.skill.kind is SkillKind.CODE):
            return None
        outcome = self.run_tests(edit.skill.code or "", edit.skill.tests or "")
        if outcome.passed:
            return None
        return f"its tests fail: {outcome.detail}" if outcome.detail else "its tests fail"


@dataclass
class AcceptanceGate:
    """SkillOpt's rule: keep an edit only if the held-out score strictly improves. `score` evaluates a
    library on one fixed held-out batch, so scores of a library already seen are reused."""

    score: Callable[[Library], float]
    name: str = "held-out"
    _scores: dict[str, float] = field(default_factory=dict, repr=False)

    def check(self, library: Library, edit: Edit) -> str | None:
        before = self._scored(library)
        after = self._scored(apply_edit(library, edit))
        return None if after > before else f"held-out score {after:.6g} does not beat {before:.6g}"

    def _scored(self, library: Library) -> float:
        if library.hash not in self._scores:
            self._scores[library.hash] = self.score(library)
        return self._scores[library.hash]


@dataclass(frozen=True)
class Refusal:
    generation: int
    gate: str
    edit: str
    reason: str


@dataclass
class RefusedBuffer:
    """Edits the gates refused, newest last, to show the proposer what not to propose again."""

    refusals: list[Refusal] = field(default_factory=list)

    def add(self, refusal: Refusal) -> None:
        self.refusals.append(refusal)

    def render(self, limit: int = 20) -> str:
        recent = self.refusals[-limit:] if limit > 0 else []
        if not recent:
            return ""
        lines = [f"- {r.edit} (refused by {r.gate}: {r.reason})" for r in recent]
        return "Edits already tried and refused; do not propose them again:\n" + "\n".join(lines) + "\n"


def admit(
    library: Library, edits: Iterable[Edit], gates: Sequence[Gate], buffer: RefusedBuffer, generation: int = 0
) -> Library:
    """Apply each edit in turn that applies cleanly and passes every gate (cheap gates first: the
    order of `gates`); the others go to `buffer` with the first reason they were refused."""
    for edit in edits:
        try:
            apply_edit(library, edit)
            refused = _first_refusal(gates, library, edit)
        except EditError as exc:
            refused = ("apply", str(exc))
        if refused is None:
            library = apply_edit(library, edit, generation)
        else:
            buffer.add(Refusal(generation, refused[0], edit.describe(), refused[1]))
    return library


def _first_refusal(gates: Sequence[Gate], library: Library, edit: Edit) -> tuple[str, str] | None:
    for gate in gates:
        reason = gate.check(library, edit)
        if reason is not None:
            return gate.name, reason
    return None
