"""A stand-in LLM for runs on OpenEvolve's function_minimization example: it rewrites the EVOLVE
block's `search_algorithm`, calling `evaluate_function` from the program's fixed part, with a number
of samples and a refinement step drawn from each request's prompt and seed. Use it in a config as
`model = "program_llm:build"` (with tests/ on the Python path)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from coevo.llm.base import Completion, Message, SamplingParams

ANSWER = """{{Random search over {samples} points, then {samples} steps of size {step} around the best.}}
```python
import numpy as np


def search_algorithm(iterations={samples}, bounds=(-5, 5)):
    best_x, best_y = np.random.uniform(bounds[0], bounds[1], 2)
    best_value = evaluate_function(best_x, best_y)
    for _ in range(iterations):
        x, y = np.random.uniform(bounds[0], bounds[1], 2)
        value = evaluate_function(x, y)
        if value < best_value:
            best_x, best_y, best_value = x, y, value
    for _ in range(iterations):
        x, y = best_x + np.random.normal(0, {step}), best_y + np.random.normal(0, {step})
        value = evaluate_function(x, y)
        if value < best_value:
            best_x, best_y, best_value = x, y, value
    return best_x, best_y, best_value
```"""


class ProgramLLM:
    name = "program-scripted"
    supports_weights = False

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        answers = []
        for index, messages in enumerate(requests):
            prompt = "".join(m["content"] for m in messages)
            digest = hashlib.sha256(f"{prompt}|{sampling.seed_for(index)}".encode()).digest()
            text = ANSWER.format(samples=100 * (1 + digest[0] % 8), step=(1 + digest[1] % 5) / 10)
            answers.append(Completion(text, len(prompt) // 4, len(text) // 4, 0.0, "stop"))
        return answers


def build(config) -> ProgramLLM:
    """The `module:factory` entry a run config names."""
    return ProgramLLM()
