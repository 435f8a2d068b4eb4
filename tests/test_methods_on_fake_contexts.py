"""Every built-in method runs on a fake context of each family it names, seen through that family's
context protocol alone (`ContextView`), with no runner, store, sandbox or model behind it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest
from scripted_llm import ScriptedLLM

from coevo.candidate import Candidate
from coevo.es.perturbation import Perturbation
from coevo.family import EPISODES, HEURISTICS, Family
from coevo.islands import IslandPopulation
from coevo.llm.base import SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.run.build import build_method
from coevo.run.config import validate
from coevo.run.context_view import ContextView
from coevo.workload import Evaluation, Trajectory, Turn
from tasks import get_task

AGENT = {"workload": {"kind": "agent", "env": "gridnav", "episodes": 2}}
CASES = [
    ("eoh", HEURISTICS),
    ("eoh+es", HEURISTICS),
    ("sample", HEURISTICS),
    ("sample+es", HEURISTICS),
    ("hill-climb", HEURISTICS),
    ("coevo", HEURISTICS),
    ("skills", HEURISTICS),
    ("es-then-skills", HEURISTICS),
    ("es", EPISODES),
    ("skills", EPISODES),
    ("es-then-skills", EPISODES),
    ("coevo", EPISODES),
]
SPENT_IN_ONE_GENERATION = {("skills", "heuristics")}
"""Cases whose budget runs out in the generation: `skills` on heuristics learns while budget is left,
through a val sandbox, which a fake context has not."""


@dataclass
class FakeRun:
    """The services every family shares, recording what a method asked of them."""

    budget_left: int
    run_dir: Path
    es_size: int = 0
    llm: ScriptedLLM = field(default_factory=ScriptedLLM)
    ledger: BudgetLedger = field(default_factory=BudgetLedger)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    prompts: object = None
    generation: int = 0
    es_updates: int = 0
    told: list[list[float | None]] = field(default_factory=list)
    texts: list[object] = field(default_factory=list)

    def charge(self, evaluations: int, llm_calls: int = 0) -> None:
        self.budget_left -= min(evaluations, self.budget_left)

    def ask(self) -> list[Perturbation]:
        return [Perturbation(seed=i // 2, sigma=0.01, sign=1 - 2 * (i % 2)) for i in range(self.es_size)]

    def tell(self, perturbations: Sequence[Perturbation], rewards: Sequence[float | None]) -> None:
        assert len(perturbations) == len(rewards)
        self.told.append(list(rewards))
        self.es_updates += 1

    def sampling_for_call(self) -> SamplingParams:
        return SamplingParams(max_new_tokens=64, seed=self.generation)

    def record_text(self, items, prompt_id=None) -> None:
        self.texts.extend(items)

    def register_prompt(self, variant) -> None:
        self.texts.append(variant)


@dataclass
class FakeHeuristics(FakeRun):
    """Heuristics scored by a formula of their position: no sandbox."""

    task: object = field(default_factory=lambda: get_task("tsp_construct"))
    evaluator: object = None
    """No sandbox: no code skill is tested (the runs start from no library)."""
    population: IslandPopulation = field(default_factory=lambda: IslandPopulation(4))
    written: list[str] = field(default_factory=list)

    def propose(self, requests, perturbations=None, prompt_ids=None) -> list[Candidate]:
        requests = requests[: self.budget_left]
        children = [self._scored(f"child {len(self.written) + i}", r.operator) for i, r in enumerate(requests)]
        self.written += [r.operator for r in requests]
        self.charge(len(children))
        return children

    def add_library(self, codes: dict[str, str]) -> list[Candidate]:
        scored = [self._scored(code, "library") for code in list(codes.values())[: self.budget_left]]
        self.charge(len(scored))
        return scored

    def _scored(self, code: str, operator: str) -> Candidate:
        number = len(self.written) + len(self.population.members)
        fitness = None if number % 5 == 4 else -float(number % 7)  # every fifth is invalid
        candidate = Candidate(code=f"# {code}\n", thought="", operator=operator, generation=self.generation)
        if fitness is None:
            return replace(candidate, reason="invalid")
        return replace(candidate, fitness=fitness, objective=-fitness)


@dataclass
class FakeBatch:
    env: str = "gridnav"
    horizon: int = 2
    seeds: tuple[int, ...] = (1, 2)
    heldout: str = "val"
    heldout_every: int | None = None


@dataclass
class FakeEpisodes(FakeRun):
    """Episodes whose reward is the member's index (even members fail), with one-turn trajectories."""

    workload: FakeBatch = field(default_factory=FakeBatch)
    played: int = 0
    heldout: list[str] = field(default_factory=list)

    def play(self, perturbations, shown="", traces=False) -> list[Evaluation]:
        count = min(len(perturbations), self.budget_left)
        self.played += count
        self.charge(count)
        return [self._episode(i) for i in range(count)]

    def generation_workload(self) -> FakeBatch:
        return self.workload

    def record_heldout(self, when: str) -> None:
        self.heldout.append(when)

    def _episode(self, index: int) -> Evaluation:
        reward = float(index % 2)
        turn = Turn("you are at (0, 0)", "move up", reward)
        trajectory = Trajectory(f"seed {index}", (turn,), reward)
        return Evaluation("max", "search", (reward,), reward, trajectories=(trajectory,))


def fake_context(method, family: Family, budget: int, run_dir: Path) -> FakeRun:
    fake_class = FakeHeuristics if family is HEURISTICS else FakeEpisodes
    size = method.es_population() if method.uses_weights else 0
    return fake_class(budget_left=budget, run_dir=run_dir, es_size=size, prompts=method.prompt_pool())


@pytest.mark.parametrize(("name", "family"), CASES, ids=[f"{n}-{f.name}" for n, f in CASES])
def test_every_method_runs_a_generation_on_a_fake_context_of_its_family(name: str, family: Family, tmp_path: Path):
    budget = 8 if (name, family.name) in SPENT_IN_ONE_GENERATION else 40
    data = {"method": name, "model": "scripted_llm:build", "budget": budget, "population_size": 4, "library": "seed"}
    if family is EPISODES:
        data.update(AGENT)
        data.pop("library")
    else:
        data["task"] = "tsp_construct"
    if name == "coevo" and family is HEURISTICS:
        data["settings"] = {"prompt_pool": 2}
    config = validate(data)
    method = build_method(config, family)
    assert not hasattr(method, "config"), "a method holds its settings and the run's facts, not the whole config"
    fake = fake_context(method, family, config.budget, tmp_path)
    context = ContextView(fake, family.context)
    method.run_phase(context, "init")
    fake.generation = 1
    for phase in method.phases:
        method.run_phase(context, phase)

    assert fake.budget_left < config.budget, "the method spent evaluations through its context"
    if method.uses_weights:
        assert fake.told, "a method that evolves the weights told ES its members' rewards"
        rewards = fake.told[-1]
        assert len(rewards) == method.es_population() and any(r is not None for r in rewards)
    if family is HEURISTICS:
        assert fake.written and fake.population.members, "heuristics written and kept"
    else:
        assert fake.played and fake.heldout == ["before"], "episodes played after the base weights were measured"


def test_a_method_reaches_only_its_familys_services(tmp_path: Path) -> None:
    fake = FakeEpisodes(budget_left=4, run_dir=tmp_path)
    episodes = ContextView(fake, EPISODES.context)
    assert episodes.budget_left == 4 and episodes.generation_workload() is fake.workload
    with pytest.raises(AttributeError, match="EpisodeContext offers no 'propose'"):
        episodes.propose
    heuristics = ContextView(FakeHeuristics(budget_left=4, run_dir=tmp_path), HEURISTICS.context)
    with pytest.raises(AttributeError, match="HeuristicContext offers no 'play'"):
        heuristics.play
    with pytest.raises(AttributeError, match="cannot replace the context's 'budget_left'"):
        heuristics.budget_left = 0


def test_a_method_is_built_for_the_families_it_names_only() -> None:
    config = validate({"method": "eoh", "task": "tsp_construct", "model": "scripted_llm:build", "budget": 4})
    with pytest.raises(ValueError, match="method eoh does not run on episodes played in an environment"):
        build_method(config, EPISODES)
