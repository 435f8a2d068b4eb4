"""Operators that answer in words: ReEvo-style reflections and GEPA-style prompt rewrites.

* `Reflector.short`: for a pair of parents, one hint on what makes the better one better.
* `Reflector.long`: folds recent short hints into the accumulated advice.
  Both hints are meant for `EoHOperators.propose(..., hints=...)`.
* `ComponentRewriter.rewrite`: a new text for one prompt component, written from the evaluator's
  feedback on heuristics produced under it; answers that break the component's placeholders are
  rejected, so every accepted text can go straight into `PromptTemplates.with_component`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from coevo.llm.base import LLM, Message, SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.operators.metering import metered_generate
from coevo.operators.parsing import ParseFailure
from coevo.operators.records import Parent, Rejection, TaskSpec, TextProposal, completion_error
from coevo.operators.templates import PLACEHOLDERS, PromptTemplates, default_templates, placeholder_problem

_FENCED = re.compile(r"^[ \t]*(?:```|~~~)[\w+-]*[ \t]*\n(.*?)\n[ \t]*(?:```|~~~)", re.DOTALL | re.MULTILINE)
_LABEL = re.compile(r"^\W*(?:hint|advice|reflection|answer)\W*:\s*", re.IGNORECASE)

Interpreter = Callable[[str], "str | ParseFailure"]
"""Turns an answer into the text wanted, or says why it is unusable."""


@dataclass(frozen=True)
class Reflector:
    """Short (pairwise) and long (accumulated) reflections on one task's heuristics."""

    llm: LLM
    task: TaskSpec
    ledger: BudgetLedger
    templates: PromptTemplates = field(default_factory=default_templates)
    sampling: SamplingParams = SamplingParams(max_new_tokens=128)

    def short_prompt(self, pair: tuple[Parent, Parent]) -> list[Message]:
        """Prompt comparing the pair; the better one by the task's own direction is shown first."""
        better, worse = _ordered(pair, self.task.sense)
        return self._messages(
            self.templates.render(
                "reflect_short",
                task_description=self.task.description.strip(),
                better=better.code.strip(),
                worse=worse.code.strip(),
            )
        )

    def short(self, pairs: Sequence[tuple[Parent, Parent]]) -> list[TextProposal | Rejection]:
        """One hint per pair, in one generate call."""
        prompts = [self.short_prompt(pair) for pair in pairs]
        parents = [tuple(parent.key for parent in pair) for pair in pairs]
        return _ask(self.llm, self.ledger, "reflect_short", prompts, self.sampling, _clean_hint, parents)

    def long_prompt(self, previous: str, recent: Sequence[str]) -> list[Message]:
        return self._messages(
            self.templates.render(
                "reflect_long",
                task_description=self.task.description.strip(),
                previous=previous.strip() or "(none yet)",
                recent="\n".join(f"- {hint.strip()}" for hint in recent),
            )
        )

    def long(self, previous: str, recent: Sequence[str]) -> TextProposal | Rejection:
        """The accumulated advice updated with `recent` short hints."""
        if not recent:
            raise ValueError("long reflection needs at least one recent hint")
        prompt = self.long_prompt(previous, recent)
        return _ask(self.llm, self.ledger, "reflect_long", [prompt], self.sampling, _clean_hint)[0]

    def _messages(self, user: str) -> list[Message]:
        return [{"role": "system", "content": self.templates["system"]}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class ComponentRewriter:
    """GEPA-style reflective mutation of one prompt component from evaluator feedback."""

    llm: LLM
    ledger: BudgetLedger
    sampling: SamplingParams = SamplingParams(max_new_tokens=384)

    def rewrite_prompt(self, templates: PromptTemplates, component: str, feedback: Sequence[str]) -> list[Message]:
        keep = _placeholder_rule(*PLACEHOLDERS[component])
        user = templates.render(
            "rewrite",
            component=component,
            current=templates[component].strip(),
            feedback="\n".join(f"- {item.strip()}" for item in feedback),
            keep_placeholders=keep,
        )
        return [{"role": "user", "content": user}]

    def rewrite(
        self, templates: PromptTemplates, component: str, feedback: Sequence[str], samples: int = 1
    ) -> list[TextProposal | Rejection]:
        """`samples` candidate texts for `component`, in one generate call."""
        if component not in templates:
            raise ValueError(f"unknown prompt component {component!r}; known: {', '.join(templates)}")
        if not feedback:
            raise ValueError("a rewrite needs at least one feedback item")
        prompt = self.rewrite_prompt(templates, component, feedback)

        def interpret(text: str) -> str | ParseFailure:
            fenced = _FENCED.search(text)
            rewritten = (fenced.group(1) if fenced else text).strip()
            if not rewritten:
                return ParseFailure("empty rewrite")
            problem = placeholder_problem(component, rewritten)
            return ParseFailure(problem) if problem else rewritten

        return _ask(self.llm, self.ledger, f"rewrite:{component}", [prompt] * samples, self.sampling, interpret)


def _placeholder_rule(allowed: frozenset[str], required: frozenset[str]) -> str:
    """The sentence telling the model which $placeholders its rewrite must keep and may use."""

    def listed(names: frozenset[str]) -> str:
        return ", ".join(f"${name}" for name in sorted(names))

    if not allowed:
        return "Do not write any $ placeholders."
    if not required:
        return f"You may use these placeholders: {listed(allowed)}."
    optional = f"; you may also use {listed(allowed - required)}" if allowed != required else ""
    return f"Keep these placeholders exactly as written: {listed(required)}{optional}."


def _ordered(pair: tuple[Parent, Parent], sense: Literal["min", "max"]) -> tuple[Parent, Parent]:
    """(better, worse) by natural-sign objectives; a tie keeps the given order."""
    first, second = pair
    if first.objective is None or second.objective is None:
        raise ValueError("short reflection compares evaluated parents; an objective is None")
    first_wins = first.objective >= second.objective if sense == "max" else first.objective <= second.objective
    return (first, second) if first_wins else (second, first)


def _clean_hint(text: str) -> str | ParseFailure:
    """One paragraph of advice, without fences, quotes or a `Hint:` label."""
    fenced = _FENCED.search(text)
    body = fenced.group(1) if fenced else text
    paragraphs = [p for p in re.split(r"\n\s*\n", body.strip()) if p.strip()]
    if not paragraphs:
        return ParseFailure("empty reflection")
    return _LABEL.sub("", " ".join(paragraphs[0].split())).strip("\"' ")


def _ask(
    llm: LLM,
    ledger: BudgetLedger,
    operator: str,
    prompts: list[list[Message]],
    sampling: SamplingParams,
    interpret: Interpreter,
    parents: Sequence[tuple[str, ...]] | None = None,
) -> list[TextProposal | Rejection]:
    """Generate, record, and turn each answer into text or a rejection."""
    if not prompts:
        return []
    completions = metered_generate(llm, prompts, sampling, ledger, operator)
    results: list[TextProposal | Rejection] = []
    for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        keys = parents[index] if parents else ()
        error = completion_error(completion)
        outcome = interpret(completion.text) if error is None else ParseFailure(error)
        if isinstance(outcome, ParseFailure):
            results.append(Rejection(outcome.reason, operator, prompt, completion, keys))
        else:
            results.append(TextProposal(outcome, operator, prompt, completion, keys))
    return results
