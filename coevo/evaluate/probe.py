"""A minimal task for measuring and testing the sandbox itself.

Each instance is a short vector of values; the heuristic ``pick(values) -> int`` names one
index and the objective is the value there. It is cheap enough that evaluating a trivial
candidate measures the sandbox's own overhead, and it has the full Task protocol (splits, a
trusted driver, one call answered in the sandbox per instance, validation in the parent), so
the evaluator can be tested without any of the real problems.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tasks.base import Heuristic, Instance, InstanceGroup, InvalidSolution, SplitName, Task
from tasks.checks import returned_index

_SPLIT_SEEDS = {"search": 11, "val": 12, "test": 13}
_SPLIT_SIZES = {"search": 4, "val": 8, "test": 16}
VALUES_PER_INSTANCE = 8


class ProbeTask(Task):
    """Pick the index of the smallest value."""

    name = "probe"
    function_name = "pick"
    signature = "pick(values: np.ndarray) -> int"
    description = "Return the index of the smallest entry of `values`."
    reference_name = "exact minimum"
    child_runs_driver = True

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        rng = np.random.default_rng(_SPLIT_SEEDS[split])
        instances = [{"values": rng.random(VALUES_PER_INSTANCE)} for _ in range(_SPLIT_SIZES[split])]
        return [InstanceGroup(f"n{VALUES_PER_INSTANCE}", instances)]

    async def drive(self, heuristic: Heuristic, instance: Instance) -> int:
        return returned_index(await heuristic(), self.function_name)

    def answer(self, function: Callable[..., Any], state: Instance) -> int:
        return returned_index(function(state["values"].copy()), self.function_name)

    def score(self, instance: Instance, solution: Any) -> float:
        if type(solution) is not int:
            raise InvalidSolution(f"the solution must be an index, got {type(solution).__name__}")
        if not 0 <= solution < len(instance["values"]):
            raise InvalidSolution(f"index {solution} is out of range 0..{len(instance['values']) - 1}")
        return float(instance["values"][solution])

    def seed_code(self) -> str:
        return "import numpy as np\n\ndef pick(values):\n    return int(np.argmin(values))\n"
