"""The AHD side of the skill library: code skills are helper functions a heuristic may call.

The code skills a request is shown are read by the parser before the answer
(`ProposalRequest.helpers`), so a child that calls a helper without defining it gets the helper's
source in its code: what is stored is self-contained, and the normal validation (policy check,
sandbox, task scoring) runs on it. A code skill's own tests run in the task's sandbox as one ordinary
candidate: the helper, its tests, a call of each `test_*` function at module level, then the task's
seed heuristic so the module loads as a candidate. A failing assertion makes the module raise, which
the sandbox reports like any candidate error; nothing new runs outside it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coevo.candidate import Candidate, fitness_of
from coevo.evaluate.evaluator import Evaluator
from coevo.llm.base import SamplingParams
from coevo.operators.eoh_operators import ProposalRequest
from coevo.operators.records import Parent, Proposal
from coevo.skills.gates import CodeTestResult
from coevo.skills.library import Library
from coevo.skills.render import by_credit, render_prompt
from coevo.skills.skill import Skill
from coevo.workload import Trajectory, Turn

if TYPE_CHECKING:
    from coevo.context import HeuristicContext
    from coevo.skills.settings import SkillsSettings


def defined_functions(code: str) -> set[str]:
    """Top-level function names of `code` (empty when it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def helpers_source(skills: Iterable[Skill]) -> str:
    """The code skills' sources, one after another, for a proposal request's `helpers`."""
    return "\n\n".join(skill.code.rstrip() + "\n" for skill in skills if skill.code is not None)


def skills_request(
    operator: str, parents: Sequence[Parent], skills: Sequence[Skill], budget: int
) -> tuple[ProposalRequest, frozenset[str]]:
    """(a request showing `skills` rendered within `budget` tokens, with their helpers; the names shown)."""
    hints, names = render_prompt(skills, budget)
    helpers = helpers_source(s for s in skills if s.name in names)
    return ProposalRequest(operator, tuple(parents), hints, helpers=helpers), frozenset(names)


@dataclass
class ValScore:
    """The held-out score of a library on an AHD task, for `AcceptanceGate`: the val fitness of one m1
    child of `parent` written with the whole library, every library asked under the same `sampling`
    seed so only the library differs. An unusable or invalid child scores -inf. Not charged to the
    budget (as the agent workload's held-out episodes are not); its LLM calls are recorded."""

    context: HeuristicContext
    settings: SkillsSettings
    parent: Parent
    val: Evaluator
    sampling: SamplingParams

    def __call__(self, library: Library) -> float:
        request, _ = skills_request("m1", [self.parent], by_credit(library), self.settings.prompt_tokens)
        (item,) = self.context.operators.propose_many([request], self.sampling)
        self.context.record_text([item])
        if not isinstance(item, Proposal):
            return -math.inf
        result = self.val.evaluate(item.code)
        return -math.inf if result.objective is None else fitness_of(result.objective, self.val.task.sense)


class SandboxTests:
    """A `CodeTestRunner` that runs a code skill's tests as one candidate in `evaluator`'s sandbox."""

    def __init__(self, evaluator: Evaluator, seed_code: str) -> None:
        self.evaluator = evaluator
        self.seed_code = seed_code

    def __call__(self, code: str, tests: str) -> CodeTestResult:
        names = sorted(n for n in defined_functions(tests) if n.startswith("test_"))
        if not names:
            return CodeTestResult(False, "no test_* function")
        calls = "".join(f"{name}()\n" for name in names)
        result = self.evaluator.evaluate(f"{code.rstrip()}\n\n\n{tests.rstrip()}\n\n\n{calls}\n\n{self.seed_code}")
        return CodeTestResult(result.valid, result.reason or "")


def failed_children(
    generation: int, children: Sequence[Candidate], rewards: Sequence[float]
) -> list[tuple[str, Trajectory]]:
    """(source id, one-turn trajectory) of each child that was invalid or did not beat its parent: the
    code is the action, the evaluator's verdict the observation, the improvement reward the reward."""
    failed = []
    for index, (child, reward) in enumerate(zip(children, rewards, strict=False)):
        if reward > 0:
            continue
        verdict = child.reason or f"valid, objective {child.objective:.4g}, no better than its parent"
        turn = Turn(f"The {child.operator} heuristic was evaluated: {verdict}", child.code, reward)
        failed.append((f"g{generation}/m{index}/{child.key}", Trajectory(child.key, (turn,), reward)))
    return failed
