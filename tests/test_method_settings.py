"""A method's own keys live in the config's `[settings]` table and are checked by the model the method
declares: a bad value or another method's key is one line naming the key, the values reach the method,
and runs stored when those keys sat at the top of the config resume as they would have."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_runner import config

from coevo.family import EPISODES, HEURISTICS
from coevo.methods.coevo import CoevoSettings
from coevo.methods.sample import SampleSettings
from coevo.run.build import build_method
from coevo.run.config import ConfigError, validate
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore
from coevo.skills.settings import SkillsSettings
from coevo.tune.space import load_space

AGENT = {"workload": {"kind": "agent", "env": "gridnav", "horizon": 2, "episodes": 2}}


def one_line_error(method: str, **changes) -> str:
    with pytest.raises(ConfigError) as caught:
        config(method, **changes)
    assert "\n" not in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize(
    ("method", "settings", "expected"),
    [
        ("sample", {"batch": 0}, "config key 'settings.batch': Input should be greater than or equal to 1"),
        ("coevo", {"operators": ["zz"]}, "config key 'settings.operators': operators must be among"),
        ("coevo", {"prompt_pool": 0}, "config key 'settings.prompt_pool'"),
        ("skills", {"show_share": 2}, "config key 'settings.show_share'"),
        ("hill-climb", {"operator": "e1"}, "config key 'settings.operator'"),
    ],
)
def test_a_bad_value_of_a_methods_own_key_is_refused_by_its_model(method: str, settings: dict, expected: str):
    assert one_line_error(method, settings=settings).startswith(expected)


@pytest.mark.parametrize(
    ("method", "settings", "expected"),
    [
        ("sample", {"prompt_pool": 2}, "unknown config key 'settings.prompt_pool' for method sample (a key of coevo)"),
        ("skills", {"operators": ["m1"]}, "unknown config key 'settings.operators' for method skills (a key of coevo)"),
        (
            "eoh",
            {"batch": 2},
            "unknown config key 'settings.batch' for method eoh (a key of hill-climb, sample, sample+es)",
        ),
        (
            "sample",
            {"bach": 2},
            "unknown config key 'settings.bach' for method sample (did you mean 'settings.batch'?)",
        ),
        ("coevo", {"colour": 1}, "unknown config key 'settings.colour' for method coevo"),
    ],
)
def test_a_key_the_named_method_does_not_take_is_refused_naming_it(method: str, settings: dict, expected: str):
    assert one_line_error(method, settings=settings) == expected


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "sample_batch",
            6,
            "unknown config key 'sample_batch' (a method's own keys are in its [settings] table: settings.batch)",
        ),
        ("coevo", {"prompt_pool": 2}, "unknown config key 'coevo' (a method's own keys are in its [settings] table)"),
        ("skills", {"analyses": 2}, "unknown config key 'skills' (a method's own keys are in its [settings] table)"),
    ],
)
def test_the_former_top_level_method_keys_point_to_settings(key: str, value, expected: str):
    assert one_line_error("sample", **{key: value}) == expected


def test_each_methods_settings_reach_it() -> None:
    sample = build_method(config("sample+es", settings={"batch": 5}), HEURISTICS)
    assert sample.settings == SampleSettings(batch=5) and sample.es_population() == 5
    coevo = build_method(config("coevo", settings={"prompt_pool": 2, "operators": ["tune"]}), HEURISTICS)
    assert coevo.settings == CoevoSettings(prompt_pool=2, operators=("tune",))
    assert coevo.prompt_pool().size == 2 and not coevo.evolves_skills
    skills = build_method(config("skills", **AGENT, settings={"analyses": 3, "min_sources": 1}), EPISODES)
    assert skills.skills.settings == SkillsSettings(analyses=3, min_sources=1)
    climb = build_method(config("hill-climb", settings={"operator": "m2"}), HEURISTICS)
    assert (climb.settings.operator, climb.settings.batch) == ("m2", 1)
    assert build_method(config("eoh"), HEURISTICS).prompt_pool().size == 1


def test_sample_writes_batches_of_its_settings_batch(tmp_path: Path) -> None:
    with start_run(config("sample", budget=7, settings={"batch": 3}), tmp_path) as runner:
        runner.run()
        steps = [step for step, _ in runner.store.candidates()]
    assert [steps.count(step) for step in sorted(set(steps))] == [1, 3, 3], "the seed, then two batches of 3"


def test_a_run_stored_with_the_former_top_level_keys_resumes_as_it_would_have(tmp_path: Path) -> None:
    """Stored configs held every section with its defaults; the run's method's own keys move into its
    settings and the rest (here `coevo`'s and the skills' defaults, unread by sample) are dropped."""
    current = config("sample", budget=7, settings={"batch": 3})
    with start_run(current, tmp_path / "straight") as runner:
        runner.run()
        expected = [c for _, c in runner.store.candidates()]
    former = {key: value for key, value in current.model_dump(mode="json").items() if key != "settings"}
    former |= {"sample_batch": 3, "coevo": {"prompt_pool": 3}, "skills": {"library": None, "analyses": 4}}
    RunStore.create(tmp_path / "former", former).close()
    with resume_run(tmp_path / "former") as runner:
        assert runner.config.settings == {"batch": 3}
        runner.run()
        assert [c for _, c in runner.store.candidates()] == expected


def test_tune_knobs_set_the_methods_own_table_and_are_refused_for_a_method_without_the_key(tmp_path: Path) -> None:
    path = tmp_path / "study.toml"
    base = 'task = "tsp_construct"\nmodel = "scripted_llm:build"\nbudget = 12\npopulation_size = 8\n'
    tune = (
        '[tune]\n"settings.prompt_pool" = {choices = [1, 2]}\n"settings.operators" = {choices = [["m1"], ["tune"]]}\n'
    )
    path.write_text('method = "coevo"\n' + base + tune)
    trial = validate(load_space(path).with_values({"settings.prompt_pool": 2, "settings.operators": ("tune",)}))
    assert build_method(trial, HEURISTICS).settings == CoevoSettings(prompt_pool=2, operators=("tune",))
    path.write_text('method = "sample"\n' + base + tune)
    with pytest.raises(ConfigError) as caught:
        load_space(path)
    assert str(caught.value) == (
        'tune."settings.prompt_pool": no field prompt_pool in [settings] (SampleSettings); known: batch'
    )
