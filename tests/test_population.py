"""The population manager: elitist heuristic pool and the prompt pool of the coevo method."""

from __future__ import annotations

import numpy as np
import pytest

from coevo.candidate import Candidate, fitness_of
from coevo.evaluate.evaluator import Evaluator
from coevo.operators.templates import default_templates
from coevo.population import Population, PromptPool, PromptVariant
from tasks import get_task


def candidate(code: str, objective: float | None) -> Candidate:
    """A heuristic of a minimising task: its fitness is the negated objective."""
    fitness = None if objective is None else -objective
    return Candidate(code=code, thought="", operator="m2", generation=1, fitness=fitness, objective=objective)


def test_population_keeps_the_best_distinct_valid_candidates() -> None:
    population = Population(3, [candidate("a", 5.0), candidate("b", None)])
    population.add(
        [candidate("c", 4.0), candidate("a", 5.0), candidate("d", 6.0), candidate("e", 6.0), candidate("f", 7.0)]
    )
    assert [c.code for c in population.members] == ["c", "a", "d"]  # d and e tie: the earlier one stays
    assert population.best.code == "c" and population.worst_fitness == -6.0
    population.add([candidate("g", 6.0)])
    assert [c.code for c in population.members] == ["c", "a", "d"], "a newcomer never unseats an equal incumbent"


BEST_FIT = "def priority(item, bins_remain_cap):\n    return -(bins_remain_cap - item)"
BEST_FIT_SCALED = "def priority(item, bins_remain_cap):\n    return -2.0 * (bins_remain_cap - item)"
BEST_FIT_COPY = """def priority(size, caps):
    \"\"\"Best fit, reformatted.\"\"\"
    # the tightest bin wins
    return -(caps - size)
"""


def test_distinct_heuristics_with_tied_bin_counts_both_stay_on_bpp_online() -> None:
    task = get_task("bpp_online")
    with Evaluator(task, "search", limit=1, workers=1) as evaluator:
        results = evaluator.evaluate_many([BEST_FIT, BEST_FIT_SCALED, BEST_FIT_COPY])
    assert all(r.valid for r in results) and len({r.objective for r in results}) == 1, "integer bin counts tie"
    scored = [
        Candidate(code, "", "m2", 1, fitness=fitness_of(r.objective, task.sense), objective=r.objective)
        for code, r in zip([BEST_FIT, BEST_FIT_SCALED, BEST_FIT_COPY], results, strict=True)
    ]
    population = Population(4, scored)
    assert [c.code for c in population.members] == [BEST_FIT, BEST_FIT_SCALED], "a cosmetic copy is the same logic"


def test_parents_are_drawn_with_eoh_rank_weights() -> None:
    population = Population(4, [candidate(str(i), float(i)) for i in range(4)])
    rng = np.random.default_rng(0)
    counts = np.zeros(4)
    for _ in range(4000):
        counts[int(population.select(rng, 1)[0].code)] += 1
    expected = 1 / (np.arange(4) + 4)
    assert counts / counts.sum() == pytest.approx(expected / expected.sum(), abs=0.02)
    pair = population.select(rng, 2)
    assert len({c.code for c in pair}) == 2


def variant(name: str, uses: int = 0, score: float = 0.0) -> PromptVariant:
    return PromptVariant(name, default_templates(), uses=uses, score=score)


def test_prompt_pool_scores_assigns_and_never_evicts_its_best() -> None:
    pool = PromptPool(2, [variant("a")])
    assert pool.admit(variant("b")) is None and [v.id for v in pool.variants] == ["a", "b"]
    slots = pool.assign(np.random.default_rng(1), 6)
    assert sorted(v.id for v in slots) == ["a", "a", "a", "b", "b", "b"]
    pool.record({"a": [1.0, 3.0], "b": [-1.0]})
    assert (pool.variants[0].uses, pool.variants[0].score) == (2, 2.0)
    assert pool.best.id == "a"
    assert pool.admit(variant("c")).id == "b"  # the worst tried one goes
    assert pool.admit(variant("d")).id == "d", "only the best and an untried variant are left: nothing to evict"
    assert [v.id for v in pool.variants] == ["a", "c"]
