"""One sign inside the loop (higher is better); the task's own direction in every prompt.

For each task sense a good and a bad heuristic go through the path a run takes: scored into
candidates, ranked by the population, shown as parents, compared by the short reflection, and
described in the rewriter's feedback. Prompts must name the task's real direction and show
natural-sign objectives.
"""

from __future__ import annotations

import pytest

from coevo.candidate import Candidate, fitness_of
from coevo.methods.base import improvement_reward
from coevo.methods.coevo import feedback_line
from coevo.operators import BudgetLedger, EoHOperators, Reflector
from coevo.population import Population, as_parent
from tasks import get_task

# task -> (good objective, bad objective) in the task's natural sign
CASES = {
    "kp_construct": (120.0, 80.0),
    "asp_construct": (2715.0, 2500.0),
    "tsp_construct": (5.75, 6.5),
    "bpp_online": (41.0, 44.0),
}
DIRECTION = {"max": "higher is better", "min": "lower is better"}


def heuristic(task_name: str, objective: float, body: str) -> Candidate:
    task = get_task(task_name)
    params = task.signature.split("(", 1)[1].split(")", 1)[0]
    code = f"def {task.function_name}({params}):\n    return {body}"
    return Candidate(
        code=code,
        thought=f"idea {body}",
        operator="m1",
        generation=1,
        fitness=fitness_of(objective, task.sense),
        objective=objective,
    )


@pytest.fixture(params=sorted(CASES))
def pair(request) -> tuple[str, Candidate, Candidate]:
    good, bad = CASES[request.param]
    return request.param, heuristic(request.param, good, "0"), heuristic(request.param, bad, "1")


def test_fitness_is_higher_for_the_better_heuristic_on_every_task(pair) -> None:
    name, good, bad = pair
    assert good.fitness > bad.fitness
    population = Population(2, [bad, good])
    assert population.best is good and population.worst_fitness == bad.fitness
    assert improvement_reward(parent=bad.fitness, child=good.fitness, worst=bad.fitness) > 0
    assert improvement_reward(parent=good.fitness, child=bad.fitness, worst=bad.fitness) < 0


def test_parent_prompt_states_the_real_direction_and_natural_objectives(pair) -> None:
    name, good, bad = pair
    task = get_task(name)
    operators = EoHOperators(llm=None, task=task, ledger=BudgetLedger())
    parents = [as_parent(c) for c in Population(2, [bad, good]).members]
    user = operators.build_prompt("e1", parents)[1]["content"]
    wrong = DIRECTION["min" if task.sense == "max" else "max"]
    assert f"Heuristic 1 (objective {good.objective:.6g}, {DIRECTION[task.sense]})" in user
    assert f"Heuristic 2 (objective {bad.objective:.6g}, {DIRECTION[task.sense]})" in user
    assert wrong not in user and "objective -" not in user


def test_short_reflection_shows_the_better_heuristic_first(pair) -> None:
    name, good, bad = pair
    reflector = Reflector(llm=None, task=get_task(name), ledger=BudgetLedger())
    for shown in [(as_parent(bad), as_parent(good)), (as_parent(good), as_parent(bad))]:
        user = reflector.short_prompt(shown)[1]["content"]
        better = user.split("Better heuristic:", 1)[1].split("Worse heuristic:", 1)[0]
        worse = user.split("Worse heuristic:", 1)[1]
        assert good.code in better and bad.code in worse


def test_rewriter_feedback_uses_the_real_direction_and_natural_objectives(pair) -> None:
    name, good, bad = pair
    task = get_task(name)
    improved = feedback_line(good, bad, task.sense)
    assert "better than its parent" in improved and "not better" not in improved
    assert f"scored {good.objective:.4g}" in improved and f"({bad.objective:.4g}; {DIRECTION[task.sense]})" in improved
    assert "not better than its parent" in feedback_line(bad, good, task.sense)
