"""The tiny random agent model whose trajectory analyses come from a script: agent skill methods
run the real loop (episodes under ES perturbations, gates) in seconds. `model = "skills_agent_lm:build"`."""

from __future__ import annotations

from typing import Any

from coevo.llm.base import Completion
from tiny_lm import build_tiny_agent

ANSWERS = [
    "name: read-the-goal\ndescription: at every turn\nlesson: compare your row and column with the goal's.",
    "name: read-the-goal\ndescription: at every turn\nlesson: compare your row and column with the goal's.",
    "name: one-off\ndescription: seen once\nlesson: move down.",
]


def build(config: Any = None) -> Any:
    backend = build_tiny_agent(config)

    def generate(requests, sampling):
        return [Completion(ANSWERS[i % len(ANSWERS)], 8, 8, 0.0, "stop", "scripted") for i in range(len(requests))]

    backend.generate = generate
    return backend
