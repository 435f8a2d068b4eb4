"""LLM4AD's Evaluation for a coevo task: its score is coevo's negated search gap (None when invalid).

A module-level class, because LLM4AD's SecureEvaluator pickles the evaluation into the process that
runs each program (a class defined inside a function cannot be pickled: every program would fail).
Imported only in LLM4AD's venv.
"""

from __future__ import annotations

from typing import Any

from llm4ad.base import Evaluation
from scoring import get_task, score_program, seed_program

TIMEOUT_S = 30
"""LLM4AD's own default for its TSP and online bin-packing tasks."""


class CoevoTaskEvaluation(Evaluation):
    def __init__(self, task_name: str, timeout_s: float = TIMEOUT_S) -> None:
        super().__init__(
            template_program=seed_program(task_name),
            task_description=get_task(task_name).description,
            timeout_seconds=timeout_s,
        )
        self.task_name = task_name

    def evaluate_program(self, program_str: str, callable_func: Any, **kwargs: Any) -> float | None:
        verdict = score_program(self.task_name, program_str)
        return verdict["combined_score"] if verdict["valid"] else None
