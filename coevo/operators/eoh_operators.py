"""EoH's five operators: write a heuristic from scratch (i1), from several parents (e1, e2), or by
modifying one parent (m1, m2); plus `tune`, which asks only for new values of a parent's numeric
parameters and splices them into its code (small models manage numbers long before whole functions).

Every candidate is a one-sentence thought plus code for the task's function. The operator differs only
in its instruction and its number of parents; the wording lives in `PromptTemplates` so the coevo method
can evolve it. Several proposals go to the backend in one `generate` call, each recorded in the ledger.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

from coevo.llm.base import LLM, Completion, Message, SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.operators.constants import parse_values, tunable_values, with_values
from coevo.operators.diff_edit import (
    DIFF_FORMAT,
    RESAMPLE_REQUEST,
    EditPolicy,
    apply_blocks,
    derived_seed,
    parse_blocks,
)
from coevo.operators.metering import metered_generate
from coevo.operators.parsing import FunctionSpec, ParseFailure, parse_heuristic
from coevo.operators.records import EditFacts, Parent, Proposal, Rejection, TaskSpec, completion_error, direction
from coevo.operators.templates import OPERATORS, PromptTemplates, default_templates

Edit = Literal["full", "diff"]
"""What a request asks for: a whole function, or SEARCH/REPLACE blocks against its parent."""

Rows = Callable[[Sequence[int]], AbstractContextManager[object]]
"""Entered around each backend call with the indices of the requests it carries (see `propose_many`)."""


@dataclass(frozen=True)
class ProposalRequest:
    """One heuristic to ask for: operator, parents, reflection hints, and optionally other templates."""

    operator: str
    parents: tuple[Parent, ...] = ()
    hints: str = ""
    templates: PromptTemplates | None = None
    helpers: str = ""
    """Source of functions the answer may call without defining (a skill library's code skills): the
    parser reads it before the answer, so the code it assembles holds the helpers it reaches, and an
    answer that defines a helper itself keeps its own."""


PARENT_COUNTS: dict[str, tuple[int, int | None]] = {
    "i1": (0, 0),
    "e1": (2, None),
    "e2": (2, None),
    "m1": (1, 1),
    "m2": (1, 1),
    "tune": (1, 1),
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
    edits: EditPolicy = EditPolicy()
    """Whether m1 and m2 ask for diffs (`coevo.operators.diff_edit`); by default whole functions."""

    def __post_init__(self) -> None:
        if self.spec.name != self.task.function_name:
            named = self.task.function_name
            raise ValueError(f"task signature names {self.spec.name!r} but function_name is {named!r}")

    @cached_property
    def spec(self) -> FunctionSpec:
        return FunctionSpec.from_signature(self.task.signature, getattr(self.task, "provided_names", frozenset()))

    def build_prompt(
        self, operator: str, parents: Sequence[Parent], hints: str = "", edit: Edit = "full"
    ) -> list[Message]:
        """The chat messages `operator` sends for these parents (and optional reflection hints); `edit`
        "diff" asks for SEARCH/REPLACE blocks against the one parent instead of a whole function."""
        _check_parents(operator, parents)
        spec = self.spec
        names = {"function_name": spec.name, "signature": spec.header}
        shown = "\n\n".join(
            self.templates.render(
                "parent",
                index=str(index),
                objective="not evaluated" if parent.objective is None else f"{parent.objective:.6g}",
                direction=direction(self.task.sense),
                thought=parent.thought or "(none given)",
                code=parent.code.strip(),
            )
            for index, parent in enumerate(parents, start=1)
        )
        if operator == "tune":
            return self._tune_prompt(parents[0], hints)
        user = self.templates.render(
            "eoh_user",
            task_description=self.task.description.strip(),
            parents=shown,
            hints=self.templates.render("hints", hints=hints.strip()) if hints.strip() else "",
            instruction=self.templates.render(operator, **names),
            output_format=(
                string.Template(DIFF_FORMAT).substitute(signature=spec.header)
                if edit == "diff"
                else self.templates.render("output_format", **names)
            ),
        )
        return [{"role": "system", "content": self.templates["system"]}, {"role": "user", "content": user}]

    def _tune_prompt(self, parent: Parent, hints: str) -> list[Message]:
        """A worked example, then the parent's values: no code and no system prompt, which small models
        answer with prose instead of a list."""
        values = tunable_values(parent.code)
        ask = self.templates.render("tune", values=_listed(values), count=str(len(values)))
        if hints.strip():
            ask = f"{self.templates.render('hints', hints=hints.strip())}\n\n{ask}"
        return [
            {"role": "user", "content": self.templates["tune_demo"]},
            {"role": "assistant", "content": self.templates["tune_demo_answer"]},
            {"role": "user", "content": ask},
        ]

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
        self, requests: Sequence[ProposalRequest], sampling: SamplingParams | None = None, rows: Rows | None = None
    ) -> list[Proposal | Rejection]:
        """Proposals for mixed operators, parents and templates, in one generate call.

        This is what lets the coevo method batch members that each use their own prompt variant. Diff
        answers that fail are asked again, then rewritten whole, in further calls for those requests
        alone; `rows(indices)` is entered around every call with the indices of the requests it carries
        (a low-rank ES host binds batch row k to the member of request indices[k]).
        """
        sampling = sampling or self.sampling
        edits: list[Edit] = [
            "diff" if self.edits.asks_diff(request.operator, f"{sampling.seed}:{sampling.first_request + i}") else "full"
            for i, request in enumerate(requests)
        ]
        prompts = {i: self._prompt(request, edit) for i, (request, edit) in enumerate(zip(requests, edits, strict=True))}
        if not prompts:
            return []
        completions = self._generate(prompts, sampling, _label(requests, prompts), rows)
        items = [
            self._interpret(request, prompts[index], completions[index], edit)
            for index, (request, edit) in enumerate(zip(requests, edits, strict=True))
        ]
        diffs = [index for index, edit in enumerate(edits) if edit == "diff"]
        return self._settle_diffs(requests, items, diffs, sampling, rows) if diffs else items

    def _prompt(self, request: ProposalRequest, edit: Edit) -> list[Message]:
        operators = self if request.templates is None else replace(self, templates=request.templates)
        return operators.build_prompt(request.operator, request.parents, request.hints, edit)

    def _generate(
        self, prompts: dict[int, list[Message]], sampling: SamplingParams, label: str, rows: Rows | None
    ) -> dict[int, Completion]:
        """Request index -> completion. Each contiguous run of indices is one call whose requests keep
        their indices' sampling streams, so an answer does not depend on which others were asked with it."""
        completions: dict[int, Completion] = {}
        for run in _contiguous_runs(sorted(prompts)):
            within = nullcontext() if rows is None else rows(run)
            run_sampling = replace(sampling, first_request=sampling.first_request + run[0])
            with within:
                answers = metered_generate(self.llm, [prompts[i] for i in run], run_sampling, self.ledger, label)
            completions.update(zip(run, answers, strict=True))
        return completions

    def _settle_diffs(
        self,
        requests: Sequence[ProposalRequest],
        items: list[Proposal | Rejection],
        diffs: list[int],
        sampling: SamplingParams,
        rows: Rows | None,
    ) -> list[Proposal | Rejection]:
        """Ask each failed diff again (its answer and the reason shown) up to `edits.resamples` times, each
        time under a fresh seed; rewrite the ones that still fail whole; record what happened to each."""
        failures: dict[int, list[Rejection]] = {index: [] for index in diffs}
        for attempt in range(1, self.edits.resamples + 1):
            failed = {index: items[index] for index in diffs if isinstance(items[index], Rejection)}
            if not failed:
                break
            for index, rejection in failed.items():
                failures[index].append(rejection)
            asks = {index: _resample_prompt(rejection) for index, rejection in failed.items()}
            resampling = replace(sampling, seed=derived_seed(sampling.seed, f"diff resample {attempt}"))
            answers = self._generate(asks, resampling, f"{_label(requests, asks)} diff resample", rows)
            for index, completion in answers.items():
                items[index] = self._interpret(requests[index], asks[index], completion, "diff")
        fallen = [index for index in diffs if isinstance(items[index], Rejection)]
        if fallen:
            for index in fallen:
                failures[index].append(items[index])
            asks = {index: self._prompt(requests[index], "full") for index in fallen}
            rewriting = replace(sampling, seed=derived_seed(sampling.seed, "full fallback"))
            answers = self._generate(asks, rewriting, f"{_label(requests, asks)} full fallback", rows)
            for index, completion in answers.items():
                items[index] = self._interpret(requests[index], asks[index], completion, "full")
        for index in diffs:
            outcome = "fallback" if index in fallen else "applied"
            items[index] = replace(items[index], edit=EditFacts(outcome, tuple(failures[index])))
        return items

    def _interpret(
        self, request: ProposalRequest, prompt: list[Message], completion: Completion, edit: Edit
    ) -> Proposal | Rejection:
        operator, parents = request.operator, tuple(p.key for p in request.parents)
        if reason := completion_error(completion):
            return Rejection(reason, operator, prompt, completion, parents)
        if operator == "tune":
            return _retuned(request.parents[0], prompt, completion)
        text = completion.text
        if edit == "diff":
            patched = _patched(request.parents[0], text)
            if isinstance(patched, ParseFailure):
                return Rejection(patched.reason, operator, prompt, completion, parents)
            text = patched
        if request.helpers:
            text = f"```python\n{request.helpers}\n```\n{text}"
        parsed = parse_heuristic(text, self.spec, truncated=edit == "full" and completion.finish_reason == "length")
        if isinstance(parsed, ParseFailure):
            return Rejection(parsed.reason, operator, prompt, completion, parents)
        return Proposal(parsed.thought, parsed.code, operator, parents, prompt, completion, parsed.repairs)


def _patched(parent: Parent, answer: str) -> str | ParseFailure:
    """The answer's prose and the parent's code (as its prompt shows it) with the answer's blocks
    applied, in the layout the parser reads; or why the blocks do not apply."""
    read = parse_blocks(answer)
    if isinstance(read, ParseFailure):
        return read
    blocks, prose = read
    code = apply_blocks(parent.code.strip(), blocks)
    if isinstance(code, ParseFailure):
        return code
    return f"{prose.strip()}\n```python\n{code}\n```"


def _resample_prompt(rejection: Rejection) -> list[Message]:
    """The failed exchange, continued: the model's answer, then why it did not apply."""
    return [
        *rejection.prompt,
        {"role": "assistant", "content": rejection.completion.text},
        {"role": "user", "content": RESAMPLE_REQUEST.format(reason=rejection.reason)},
    ]


def _label(requests: Sequence[ProposalRequest], indices: Iterable[int]) -> str:
    """The ledger's name for a call: the operators of the requests it carries."""
    return "+".join(dict.fromkeys(requests[i].operator for i in indices))


def _contiguous_runs(indices: Iterable[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for index in indices:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _retuned(parent: Parent, prompt: list[Message], completion: Completion) -> Proposal | Rejection:
    """The parent's code with the values the model chose, or why the answer is unusable."""
    old = tunable_values(parent.code)
    new = parse_values(completion.text, len(old))
    if isinstance(new, ParseFailure):
        return Rejection(new.reason, "tune", prompt, completion, (parent.key,))
    if new == old:
        return Rejection("the same values as the parent", "tune", prompt, completion, (parent.key,))
    thought = f"{parent.thought.rstrip('.')}; parameters retuned to {_listed(new)}."
    return Proposal(thought, with_values(parent.code, new), "tune", (parent.key,), prompt, completion)


def _listed(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _check_parents(operator: str, parents: Sequence[Parent]) -> None:
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; known: {', '.join(OPERATORS)}")
    fewest, most = PARENT_COUNTS[operator]
    if operator == "tune" and len(parents) == 1 and not tunable_values(parents[0].code):
        raise ValueError("operator tune needs a parent with non-zero float literals to retune")
    if len(parents) < fewest or (most is not None and len(parents) > most):
        wanted = f"{fewest}" if fewest == most else f"at least {fewest}"
        raise ValueError(f"operator {operator} needs {wanted} parent(s), got {len(parents)}")
