"""EoH's five operators: write a heuristic from scratch (i1), from several parents (e1, e2), or by
modifying one parent (m1, m2).

Every candidate is a one-sentence thought plus code for the task's function. The operator differs only
in its instruction and its number of parents; the wording lives in `PromptTemplates` so the coevo method
can evolve it. Several proposals go to the backend in one `generate` call, each recorded in the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from coevo.llm.base import LLM, Completion, Message, SamplingParams
from coevo.operators.ledger import BudgetLedger, metered_generate
from coevo.operators.parsing import FunctionSpec, ParseFailure, parse_heuristic
from coevo.operators.records import Parent, Proposal, Rejection, TaskSpec, completion_error
from coevo.operators.templates import EOH_OPERATORS, PromptTemplates, default_templates


@dataclass(frozen=True)
class ProposalRequest:
    """One heuristic to ask for: operator, parents, reflection hints, and optionally other templates."""

    operator: str
    parents: tuple[Parent, ...] = ()
    hints: str = ""
    templates: PromptTemplates | None = None


PARENT_COUNTS: dict[str, tuple[int, int | None]] = {
    "i1": (0, 0),
    "e1": (2, None),
    "e2": (2, None),
    "m1": (1, 1),
    "m2": (1, 1),
}
"""Operator -> (fewest, most) parents; None means no upper limit."""


@dataclass(frozen=True)
class EoHOperators:
    """i1, e1, e2, m1, m2 for one task, one backend and one set of templates.

    Swap templates with `dataclasses.replace(operators, templates=...)`.
    """

    llm: LLM
    task: TaskSpec
    ledger: BudgetLedger
    templates: PromptTemplates = field(default_factory=default_templates)
    sampling: SamplingParams = SamplingParams()

    def __post_init__(self) -> None:
        if self.spec.name != self.task.function_name:
            named = self.task.function_name
            raise ValueError(f"task signature names {self.spec.name!r} but function_name is {named!r}")

    @cached_property
    def spec(self) -> FunctionSpec:
        return FunctionSpec.from_signature(self.task.signature)

    def build_prompt(self, operator: str, parents: Sequence[Parent], hints: str = "") -> list[Message]:
        """The chat messages `operator` sends for these parents (and optional reflection hints)."""
        _check_parents(operator, parents)
        spec = self.spec
        names = {"function_name": spec.name, "signature": spec.header}
        shown = "\n\n".join(
            self.templates.render(
                "parent",
                index=str(index),
                objective="not evaluated" if parent.objective is None else f"{parent.objective:.6g}",
                thought=parent.thought or "(none given)",
                code=parent.code.strip(),
            )
            for index, parent in enumerate(parents, start=1)
        )
        user = self.templates.render(
            "eoh_user",
            task_description=self.task.description.strip(),
            parents=shown,
            hints=self.templates.render("hints", hints=hints.strip()) if hints.strip() else "",
            instruction=self.templates.render(operator, **names),
            output_format=self.templates.render("output_format", **names),
        )
        return [{"role": "system", "content": self.templates["system"]}, {"role": "user", "content": user}]

    def propose(
        self,
        operator: str,
        parent_sets: Sequence[Sequence[Parent]],
        hints: str = "",
        sampling: SamplingParams | None = None,
    ) -> list[Proposal | Rejection]:
        """One proposal per parent set (repeat a set for several samples), all in one generate call."""
        return self.propose_many(
            [ProposalRequest(operator, tuple(parents), hints) for parents in parent_sets], sampling
        )

    def propose_many(
        self, requests: Sequence[ProposalRequest], sampling: SamplingParams | None = None
    ) -> list[Proposal | Rejection]:
        """Proposals for mixed operators, parents and templates, still in one generate call.

        This is what lets the coevo method batch members that each use their own prompt variant.
        """
        prompts = [
            (self if request.templates is None else replace(self, templates=request.templates)).build_prompt(
                request.operator, request.parents, request.hints
            )
            for request in requests
        ]
        if not prompts:
            return []
        label = "+".join(dict.fromkeys(request.operator for request in requests))
        completions = metered_generate(self.llm, prompts, sampling or self.sampling, self.ledger, label)
        return [
            self._interpret(request.operator, tuple(p.key for p in request.parents), prompt, completion)
            for request, prompt, completion in zip(requests, prompts, completions, strict=True)
        ]

    def _interpret(
        self, operator: str, parents: tuple[str, ...], prompt: list[Message], completion: Completion
    ) -> Proposal | Rejection:
        if reason := completion_error(completion):
            return Rejection(reason, operator, prompt, completion, parents)
        parsed = parse_heuristic(completion.text, self.spec, truncated=completion.finish_reason == "length")
        if isinstance(parsed, ParseFailure):
            return Rejection(parsed.reason, operator, prompt, completion, parents)
        return Proposal(parsed.thought, parsed.code, operator, parents, prompt, completion, parsed.repairs)


def _check_parents(operator: str, parents: Sequence[Parent]) -> None:
    if operator not in EOH_OPERATORS:
        raise ValueError(f"unknown EoH operator {operator!r}; known: {', '.join(EOH_OPERATORS)}")
    fewest, most = PARENT_COUNTS[operator]
    if len(parents) < fewest or (most is not None and len(parents) > most):
        wanted = f"{fewest}" if fewest == most else f"at least {fewest}"
        raise ValueError(f"operator {operator} needs {wanted} parent(s), got {len(parents)}")
