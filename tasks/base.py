"""The task protocol every heuristic-design problem implements.

A task is split in two halves on purpose:

* ``construct`` runs *inside the sandbox*, next to untrusted candidate code. It drives the
  candidate's heuristic over one instance and returns a plain *solution* (a tour, a list of
  items, bin assignments). Anything it returns is treated as a claim, never as a score.
* ``score`` runs in the trusted parent process. It validates the solution against the
  instance and computes the objective itself, so a candidate can never report its own score.

Objectives are always minimised (KP and ASP report negated values internally and expose a
``sense`` so reports can show the natural sign).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

SEED_DIR = Path(__file__).resolve().parent.parent / "heuristics" / "seed"

SplitName = Literal["search", "val", "test"]
SPLITS: tuple[SplitName, ...] = ("search", "val", "test")

Instance = dict[str, Any]
"""One problem instance: a flat dict of numpy arrays and scalars (picklable, hashable)."""


class InvalidSolution(Exception):
    """Raised when a heuristic's output or a returned solution breaks the task's rules.

    The message is the precise, user-facing reason (e.g. "select_next_node returned 57,
    which is not an unvisited node").
    """


@dataclass(frozen=True)
class InstanceGroup:
    """Instances that share a size inside one split (e.g. the 1000 TSP100 test instances)."""

    label: str
    instances: list[Instance] = field(repr=False)


def instance_hash(instances: list[Instance]) -> str:
    """SHA-256 over the instances' arrays in a canonical order (dtype, shape and bytes)."""
    digest = hashlib.sha256()
    for inst in instances:
        for key in sorted(inst):
            value = np.asarray(inst[key])
            digest.update(key.encode())
            digest.update(str(value.dtype).encode())
            digest.update(json.dumps(list(value.shape)).encode())
            digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


class Task:
    """Base class of the AHD tasks. Subclasses fill in the class attributes and four methods."""

    name: ClassVar[str]
    function_name: ClassVar[str]
    signature: ClassVar[str]
    description: ClassVar[str]
    reference_name: ClassVar[str]
    """What ``gap_pct`` is measured against, e.g. "LKH-3 (elkai)" or "L1 lower bound"."""
    sense: ClassVar[Literal["min", "max"]] = "min"
    """Natural direction of the reported objective (internal objectives are always minimised)."""
    instance_seconds: ClassVar[float] = 10.0
    """Default per-instance time limit in the sandbox: generous for a sound heuristic on the task's
    largest instances on one slow core, so only runaway candidates hit it."""

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        """The split's instances, generated deterministically from fixed seeds."""
        raise NotImplementedError

    def construct(self, heuristic: Callable[..., Any], instance: Instance) -> Any:
        """Run the heuristic over one instance and return a solution (sandbox side)."""
        raise NotImplementedError

    def score(self, instance: Instance, solution: Any) -> float:
        """Validate the solution and return its objective (trusted side; raises InvalidSolution)."""
        raise NotImplementedError

    def seed_code(self) -> str:
        """Source of the seed heuristic shipped as ``heuristics/seed/<task name>.py``."""
        return (SEED_DIR / f"{self.name}.py").read_text()

    def reference_objective(self, instance: Instance) -> float:
        """The instance's reference value (optimum, near-optimum or bound) as a minimised objective.

        Slow by nature (LKH, OR-Tools): only ``experiments/compute_references.py`` calls it; everyone
        else reads the shipped values through ``tasks.references``.
        """
        raise NotImplementedError
