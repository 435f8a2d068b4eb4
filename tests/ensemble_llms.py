"""Two stand-in models for ensemble runs, one always better than the other: each rewrites the best
coefficient its prompt shows (see `scripted_llm.HEURISTIC`), one raising it and one lowering it, so on
a workload that scores the coefficient (higher is better) the first always improves on its parents
and the second never does. Use them in a config as `model = "ensemble_llms:better"` (or `worse`), with
tests/ on the Python path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scripted_llm import HEURISTIC

from coevo.llm.base import Completion, Message, SamplingParams

COEFFICIENT = re.compile(r"\+ (-?[\d.]+) \* distance_matrix")


class SteppingLLM:
    """Answers every request with its prompt's best coefficient moved by `step` (0.5 with no parent)."""

    def __init__(self, name: str, step: float) -> None:
        self.name = name
        self.step = step

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        return [self._answer("".join(m["content"] for m in messages)) for messages in requests]

    def _answer(self, prompt: str) -> Completion:
        shown = [float(value) for value in COEFFICIENT.findall(prompt)]
        coefficient = max(shown) + self.step if shown else 0.5
        text = HEURISTIC.format(coefficient=f"{coefficient:.3f}")
        return Completion(text, len(prompt) // 4, len(text) // 4, 0.0, "stop", self.name)


def better(config) -> SteppingLLM:
    return SteppingLLM("better", 0.25)


def worse(config) -> SteppingLLM:
    return SteppingLLM("worse", -0.25)
