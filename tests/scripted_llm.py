"""A fast, deterministic stand-in for the LLM in runner tests, whose answers depend on its weights.

It owns a tiny torch model; each request's prompt and seed become an input row, and the model's output
row sets a coefficient of the nearest-neighbour-like TSP heuristic it writes (some answers are broken on
purpose). Because the row goes through the model's forward pass, full-rank ES perturbations, low-rank
batched members and ES updates all change what it writes, as with a real LLM. Use it in a config as
`model = "scripted_llm:build"` (with tests/ on the Python path).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import torch

from coevo.llm.base import Completion, Message, SamplingParams

HEURISTIC = """{{A nearest-neighbour rule that looks {coefficient} towards the destination.}}
```python
import numpy as np


def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    nodes = np.fromiter(unvisited_nodes, dtype=np.int64)
    score = distance_matrix[current_node, nodes] + {coefficient} * distance_matrix[destination_node, nodes]
    return int(nodes[np.argmin(score)])
```"""

BROKEN = "{Something went wrong.}\n```python\ndef select_next_node(current_node, destination_node:\n    return 0\n```"


class ScriptedLLM:
    name = "scripted"
    supports_weights = True

    def __init__(self, max_batch_size: int = 16) -> None:
        generator = torch.Generator().manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 2, bias=False))
        with torch.no_grad():
            self.model[0].weight.copy_(torch.randn(2, 8, generator=generator) * 0.3)
        self.max_batch_size = max_batch_size

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        rows = []
        for index, messages in enumerate(requests):
            text = "".join(m["content"] for m in messages)
            digest = hashlib.sha256(f"{text}|{sampling.seed_for(index)}".encode()).digest()
            rows.append(np.random.default_rng(list(digest[:8])).uniform(-1, 1, 8))
        with torch.no_grad():
            outputs = self.model(torch.tensor(np.array(rows), dtype=torch.float32)).numpy()
        return [self._answer(requests[i], outputs[i]) for i in range(len(requests))]

    @staticmethod
    def _answer(messages: Sequence[Message], output: np.ndarray) -> Completion:
        prompt = "".join(m["content"] for m in messages)
        if tune := re.search(r"parameters a little: \[([^\]]*)\]\. Answer", messages[-1]["content"]):
            old = [float(v) for v in tune.group(1).split(",")]  # the tune operator wants numbers only
            shifts = [(-1) ** i * 0.3 * float(output[0]) for i in range(len(old))]  # a uniform scale changes nothing
            text = "[" + ", ".join(f"{v * (1 + shift):.4f}" for v, shift in zip(old, shifts)) + "]"
        elif "novel: yes" in prompt:  # the novelty judge: a verdict that follows the weights
            text = f"B retunes A.\nnovel: {'yes' if output[0] > 0 else 'no'}"
        elif "<<<<<<< SEARCH" in prompt:  # a diff request: note the coefficient above the parent's last line
            last = re.search(r"```python\n(.*?)```", prompt, re.DOTALL).group(1).rstrip().splitlines()[-1]
            search = last if output[1] < 0.3 else "    return None  # a line the parent does not have"
            edit = f"{search}\n=======\n    # weight {output[0]:.3f}\n{last}"
            text = f"Note the weight.\n<<<<<<< SEARCH\n{edit}\n>>>>>>> REPLACE"
        elif "```python" not in prompt and "exact signature" not in prompt:  # a reflection or a rewrite
            text = f"Weigh the distance back to the destination by about {output[0]:.2f}."
        elif output[1] > 0.45:
            text = BROKEN
        else:
            text = HEURISTIC.format(coefficient=f"{float(output[0]):.3f}")
        return Completion(text, len(prompt) // 4, len(text) // 4, 0.0, "stop", "scripted")


def build(config) -> ScriptedLLM:
    """The `module:factory` entry a run config names."""
    return ScriptedLLM(config.llm.max_batch_size)
