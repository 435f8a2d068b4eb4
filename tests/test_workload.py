"""The workload protocol: a fake workload drives the loop, and the AHD workload keeps one sign."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM

from coevo.evaluate.evaluator import Evaluator
from coevo.family import HEURISTICS
from coevo.run.config import validate
from coevo.run.runner import Runner
from coevo.run.store import RunStore
from coevo.workload import Evaluation, Member, Workload
from coevo.workloads.heuristics import AHDWorkload
from tasks import get_task

COEFFICIENT = re.compile(r"\+ (-?[\d.]+) \* distance_matrix")


class CoefficientWorkload:
    """Scores the scripted LLM's heuristics by their coefficient alone, on two fake instances."""

    name = "coefficient"

    def __init__(self, sense: str) -> None:
        self.sense = sense
        self.members: list[Member] = []
        self.remembered: list[str] = []

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        self.members += members
        return [self._one(m) for m in members]

    def _one(self, member: Member) -> Evaluation:
        found = COEFFICIENT.search(member.text)
        if found is None:
            return Evaluation(self.sense, "search", (), None, reason="no coefficient", feedback="no coefficient")
        value = float(found.group(1))
        return Evaluation(self.sense, "search", (value, value), value, feedback=f"coefficient {value}")

    def remember(self, texts: Iterable[str]) -> None:
        self.remembered += texts

    def close(self) -> None:
        pass


@pytest.mark.parametrize("sense", ["min", "max"])
def test_a_fake_workload_drives_the_loop_with_higher_is_better_rewards(tmp_path: Path, sense: str) -> None:
    workload = CoefficientWorkload(sense)
    assert isinstance(workload, Workload)
    config = validate(
        {
            "method": "sample+es",
            "task": "tsp_construct",
            "model": "scripted_llm:build",
            "budget": 13,
            "settings": {"batch": 6},
            "library": "none",
            "es": {"sigma": 0.05, "alpha": 0.05},
        }
    )
    store = RunStore.create(tmp_path, config.model_dump(mode="json"))
    with Runner(config, store, tmp_path, ScriptedLLM(), workload=workload) as runner:
        best = runner.run()
        records = runner.store.es_records()
        candidates = [c for _, c in runner.store.candidates()]

    assert len(workload.members) == len([c for c in candidates if c.code])
    assert all(m.weights is not None and m.weights.seed is not None for m in workload.members)
    valid = [c for c in candidates if c.valid]
    assert valid and all(c.fitness == (c.objective if sense == "max" else -c.objective) for c in valid)
    assert best.fitness == max(c.fitness for c in valid)
    first = records[0]
    scored = [c.fitness for c in candidates[:6]]
    assert list(first.raw_rewards) == scored, "ES is told the higher-is-better rewards, member by member"


def test_the_ahd_workload_reports_rewards_higher_is_better_on_either_sense() -> None:
    for name in ("tsp_construct", "kp_construct"):
        task = get_task(name)
        with Evaluator(task, "search", limit=2, workers=1) as evaluator:
            workload = AHDWorkload(evaluator)
            seed = task.seed_code()
            copy = "# a cosmetic copy\n" + seed
            good, again, broken = workload.evaluate([Member(seed), Member(copy), Member("def nope(:\n")])
        sign = 1.0 if task.sense == "max" else -1.0
        assert good.valid and good.reward == sign * good.objective
        assert good.rewards == tuple(sign * v for v in good.per_instance) and len(good.rewards) == 2
        assert again == good, "a cosmetic copy is scored as its original"
        assert good.trajectories is None and "mean objective" in good.feedback
        assert not broken.valid and broken.reward is None and broken.rewards == ()
        assert broken.feedback.startswith("invalid: ")


class WrappedWorkload:
    """A user's wrapper around the AHD workload (not a subclass of it), offering what a code scorer offers."""

    name: str
    sense: str
    evaluator: Evaluator

    def __init__(self, inner: AHDWorkload) -> None:
        self.inner = inner
        self.name, self.sense, self.evaluator = inner.name, inner.sense, inner.evaluator

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        return self.verdicts(self.codes(members))

    def codes(self, members: Sequence[Member]) -> list[str]:
        return self.inner.codes(members)

    def verdicts(self, codes: Sequence[str]) -> list[Evaluation]:
        return self.inner.verdicts(codes)

    def remember(self, texts: Iterable[str]) -> None:
        self.inner.remember(texts)

    def close(self) -> None:
        self.inner.close()


def test_a_workload_of_the_heuristic_family_is_reached_through_its_protocol_not_its_class(tmp_path: Path) -> None:
    config = validate({"method": "sample", "task": "tsp_construct", "model": "scripted_llm:build", "budget": 2})
    task = get_task("tsp_construct")
    assert not HEURISTICS.missing(WrappedWorkload)
    assert HEURISTICS.missing(CoefficientWorkload) == ["codes", "evaluator", "sense", "verdicts"]
    with Evaluator(task, "search", limit=2, workers=1) as evaluator:
        wrapped = WrappedWorkload(AHDWorkload(evaluator))
        store = RunStore.create(tmp_path / "wrapped", config.model_dump(mode="json"))
        with Runner(config, store, tmp_path / "wrapped", ScriptedLLM(), workload=wrapped) as runner:
            assert runner.evaluator is evaluator, "the sandbox of a code-scoring workload, whatever its class"
