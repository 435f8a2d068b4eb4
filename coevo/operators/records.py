"""What operators consume (a task's spec, parents) and what they hand back (proposals, rejections).

Operators know nothing of evaluation or of the population's own candidate type: the runner turns its
candidates into `Parent`s and turns `Proposal`s into candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from coevo.llm.base import Completion, Message


class TaskSpec(Protocol):
    """The slice of a task that prompts need (`tasks.Task` satisfies it). A task may also set
    `provided_names` (`tasks.Task.provided_names`): names its code may use without defining them."""

    function_name: str
    signature: str
    description: str
    sense: Literal["min", "max"]
    """The objective's natural direction, which prompts state."""


def direction(sense: Literal["min", "max"]) -> str:
    """How prompts say which objective values are better."""
    return "higher is better" if sense == "max" else "lower is better"


@dataclass(frozen=True)
class Parent:
    """A parent as prompts show it; `key` is its content hash, recorded as provenance."""

    key: str
    thought: str
    code: str
    objective: float | None = None
    """Objective on the search split in the task's natural sign (None when not yet evaluated)."""


@dataclass(frozen=True)
class EditFacts:
    """How a request that asked for a diff ended (`coevo.operators.diff_edit`): "applied" when a diff
    answer applied, "fallback" when every one failed and the answer is a whole rewrite; `failures`
    holds each diff answer that did not apply, in order, with its reason (the run store keeps them as
    LLM calls of their own)."""

    outcome: Literal["applied", "fallback"]
    failures: tuple[Rejection, ...] = ()


@dataclass(frozen=True)
class Proposal:
    """A parsed heuristic: one-sentence thought plus code defining the task's function."""

    thought: str
    code: str
    operator: str
    parents: tuple[str, ...]
    prompt: list[Message]
    completion: Completion
    repairs: tuple[str, ...] = ()
    """What the parser fixed on the way (renamed function, added import, ...), for diagnostics."""
    edit: EditFacts | None = None
    """Set when the request asked for a diff (None: a whole function was asked for)."""


@dataclass(frozen=True)
class TextProposal:
    """A piece of text an operator produced: a reflection hint or a rewritten prompt component."""

    text: str
    operator: str
    prompt: list[Message]
    completion: Completion
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rejection:
    """An answer that could not be used, with the one-line reason; never raised, always returned."""

    reason: str
    operator: str
    prompt: list[Message]
    completion: Completion
    parents: tuple[str, ...] = ()
    edit: EditFacts | None = None
    """Set when the request asked for a diff (None: a whole function was asked for)."""


def completion_error(completion: Completion) -> str | None:
    """The rejection reason for a completion the backend itself marked as failed, else None."""
    if completion.finish_reason != "error":
        return None
    first_line = completion.text.strip().split("\n", 1)[0]
    return f"LLM error: {first_line or 'no detail given'}"
