"""The skill methods with ES on an AHD task (tsp_construct): `es-then-skills`, and `coevo` when the config
names a skill library. The weight-sensitive scripted LLM writes the heuristics, so ES really moves the
weights; failure analyses always answer the same lesson, so edits recur and the gates decide."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM
from test_code_skills import HELPER, LESSON, code_skill

from coevo.family import EPISODES, HEURISTICS
from coevo.llm.base import Completion
from coevo.run.build import build_method
from coevo.run.config import RunConfig, validate
from coevo.run.session import resume_run, start_run
from coevo.skills import Library, save_library
from tasks import get_task

SEED_ANSWER = (
    "{The hand-weighted score, as the lesson says.}\n```python\n" + get_task("tsp_construct").seed_code() + "\n```"
)


class LessonScriptedLLM(ScriptedLLM):
    """The scripted LLM, except that it answers every failure analysis with the lesson and writes the
    task's seed heuristic whenever a prompt shows the lesson."""

    def generate(self, requests, sampling):
        answers = super().generate(requests, sampling)
        for index, messages in enumerate(requests):
            prompt = "".join(m["content"] for m in messages)
            if "Write one reusable lesson" in prompt:
                answers[index] = Completion(LESSON, 1, 1, 0.0, "stop", self.name)
            elif LESSON.rsplit(": ", 1)[1] in prompt:
                answers[index] = Completion(SEED_ANSWER, 1, 1, 0.0, "stop", self.name)
        return answers


def run_config(method: str, library: Path | None) -> RunConfig:
    """Generation 0 spends 4 evaluations, then 3 generations of 4 ES members each."""
    skills = {"analyses": 3} if library is None else {"library": str(library), "analyses": 3}
    return validate(
        {
            "task": "tsp_construct",
            "method": method,
            "model": "unused",
            "budget": 16,
            "seed": 3,
            "population_size": 4,
            "eval": {"limit": 4, "workers": 1},
            "es": {"sigma": 0.05, "alpha": 0.05},
            "settings": skills,
        }
    )


@pytest.fixture
def library(tmp_path: Path) -> Path:
    path = tmp_path / "lib"
    save_library(Library([code_skill("closest-city", HELPER)]), path)
    return path


def test_ahd_coevo_evolves_the_skill_library_only_when_the_config_names_one(library: Path) -> None:
    assert build_method(run_config("coevo", library), HEURISTICS).evolves_skills
    assert not build_method(run_config("coevo", None), HEURISTICS).evolves_skills, "without a library: prompt variants"
    assert build_method(run_config("coevo", None), EPISODES).evolves_skills, "episodes always show the library"
    assert run_config("es-then-skills", None).uses_weights and run_config("coevo", library).uses_weights


@pytest.mark.parametrize("method", ["coevo", "es-then-skills"])
def test_es_moves_the_weights_on_residuals_and_the_library_learns_when_the_method_says(
    tmp_path: Path, library: Path, method: str
) -> None:
    with start_run(run_config(method, library), tmp_path / "run", LessonScriptedLLM()) as runner:
        before, hashes = runner.host.weights_sha256(), []
        while not runner.finished:
            runner.run_step()
            hashes.append(runner.method.skills.library.hash)
        skills = runner.method.skills.library
        records = runner.store.es_records()
        analysed = [call["step"] for call in runner.store.llm_calls() if call["operator"] == "skill-analysis"]
        children = [c for _, c in runner.store.candidates() if c.generation > 0]
        moved = runner.host.weights_sha256() != before
    assert moved and len(records) == 3, "one ES update per generation"
    assert all(c.weights.seed is not None for c in children), "every child is written under its own perturbation"
    for record in records:  # mirrored pairs share their skills: ES is told rewards, centred on each pair
        pairs = zip(record.residuals[::2], record.residuals[1::2], strict=True)
        assert all(plus == pytest.approx(-minus) for plus, minus in pairs)
        assert record.residuals[0] == pytest.approx((record.raw_rewards[0] - record.raw_rewards[1]) / 2)
    assert set(skills) == {"closest-city", "prefer-near-cities"}
    helper, lesson = skills["closest-city"].meta, skills["prefer-near-cities"].meta
    assert helper.estimates == 3 and helper.uses == 3, "the starting skill is credited every generation"
    assert len(lesson.sources) >= 2, "the lesson recurred in failed children"
    if method == "coevo":
        assert sorted(set(analysed)) == [1, 2], "learns every generation but the last"
        assert lesson.generation == 1 and hashes[1] != hashes[0]
    else:
        assert set(analysed) == {3} and len(analysed) == 3, "one distillation, after the last generation"
        assert hashes[0] == hashes[1] == hashes[2] != hashes[3], "no edit before it"
        assert lesson.generation == 3 and lesson.uses == 0
        assert {source.split("/")[0] for source in lesson.sources} <= {"g1", "g2", "g3"}


@pytest.mark.parametrize("method", ["coevo", "es-then-skills"])
def test_a_resumed_run_ends_with_the_library_and_weights_of_an_uninterrupted_one(
    tmp_path: Path, library: Path, method: str
) -> None:
    config = run_config(method, library)
    with start_run(config, tmp_path / "whole", LessonScriptedLLM()) as runner:
        runner.run()
        whole, whole_weights = runner.method.skills.library, runner.host.weights_sha256()
    with start_run(config, tmp_path / "cut", LessonScriptedLLM()) as runner:
        runner.run_step()
        runner.run_step()  # generation 1 committed: its update, its failed children or its edits
        kept = list(runner.method.skills.trajectories)
    with resume_run(tmp_path / "cut", LessonScriptedLLM()) as runner:
        assert runner.method.skills.trajectories == kept
        runner.run()
        resumed, resumed_weights = runner.method.skills.library, runner.host.weights_sha256()
    assert bool(kept) == (method == "es-then-skills"), "es-then-skills carries its failed children"
    assert resumed.hash == whole.hash and "prefer-near-cities" in whole
    assert {n: s.meta for n, s in resumed.items()} == {n: s.meta for n, s in whole.items()}, "credit too"
    assert resumed_weights == whole_weights
