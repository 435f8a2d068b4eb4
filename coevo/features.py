"""Named features of a candidate's code, the dimensions a MAP-Elites grid (`coevo.map_elites`) spans.

Kept apart from the archive so the config can check feature names without importing the population.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import lru_cache

from coevo.candidate import Candidate
from coevo.pyast import parse


@lru_cache(maxsize=4096)
def _ast_nodes(code: str) -> float:
    """Nodes of the code's syntax tree, computed once per code: cells are recomputed on every `add`."""
    return float(sum(1 for _ in ast.walk(parse(code))))


FEATURES: dict[str, Callable[[Candidate], float]] = {
    "code_length": lambda candidate: float(len(candidate.code)),
    "ast_nodes": lambda candidate: _ast_nodes(candidate.code),
}
"""The built-in feature dimensions: characters of code, and nodes of its syntax tree (its complexity)."""
