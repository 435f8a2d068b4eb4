"""`[tune]` knobs as dotted config paths: each checked against the model that owns it, whose field
type picks Optuna's int, float or categorical suggestion."""

from __future__ import annotations

import tomllib
from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution, IntDistribution
from test_agent_es import CONFIG as AGENT

from coevo.run.config import ConfigError
from coevo.tune.space import TuneSpace, load_space
from coevo.tune.study import to_toml

HEURISTIC = """
method = "coevo"
task = "tsp_construct"
model = "scripted_llm:build"
budget = 12
population_size = 4
[es]
strategy = "ars"
"""


def space_of(tmp_path: Path, tune: str, base: str = HEURISTIC) -> TuneSpace:
    path = tmp_path / "study.toml"
    path.write_text(base + "[tune]\n" + tune)
    return load_space(path)


def suggested(space: TuneSpace) -> tuple[dict[str, object], dict[str, object]]:
    """One trial's distributions by knob, and the config data it makes."""
    trial = optuna.create_study().ask()
    config = space.suggest(trial)
    return trial.distributions, config.model_dump()


def test_a_method_setting_an_es_key_and_a_strategy_option_are_searched_where_their_models_put_them(
    tmp_path: Path,
) -> None:
    tune = (
        '"settings.prompt_pool" = {low = 1, high = 2}\n'
        '"es.sigma" = {low = 1e-3, high = 1e-1, log = true}\n'
        '"es.strategy_options.top_share" = {low = 0.25, high = 1.0}\n'
        "population_size = {low = 4, high = 8, step = 4}\n"
    )
    distributions, config = suggested(space_of(tmp_path, tune))
    assert isinstance(distributions["settings.prompt_pool"], IntDistribution)
    assert isinstance(distributions["population_size"], IntDistribution)
    assert isinstance(distributions["es.sigma"], FloatDistribution)
    assert isinstance(distributions["es.strategy_options.top_share"], FloatDistribution)
    assert config["settings"]["prompt_pool"] in (1, 2) and config["population_size"] in (4, 8)
    assert 0.25 <= config["es"]["strategy_options"]["top_share"] <= 1.0


def test_a_workload_kinds_own_key_is_a_knob_of_that_kind_only(tmp_path: Path) -> None:
    distributions, config = suggested(space_of(tmp_path, '"workload.episodes" = {low = 1, high = 3}\n', AGENT))
    assert isinstance(distributions["workload.episodes"], IntDistribution)
    assert config["workload"]["episodes"] in (1, 2, 3)
    with pytest.raises(ConfigError) as caught:
        space_of(tmp_path, '"workload.episodes" = {low = 1, high = 3}\n')
    assert (
        str(caught.value) == 'tune."workload.episodes": no field episodes in [workload] (WorkloadSettings); known: kind'
    )


def test_unquoted_dots_and_a_tune_subtable_name_the_same_knob(tmp_path: Path) -> None:
    quoted = space_of(tmp_path, '"es.alpha" = {low = 1e-3, high = 1e-2}\n').knobs
    assert space_of(tmp_path, "es.alpha = {low = 1e-3, high = 1e-2}\n").knobs == quoted
    assert space_of(tmp_path, "[tune.es]\nalpha = {low = 1e-3, high = 1e-2}\n").knobs == quoted


@pytest.mark.parametrize(
    ("tune", "message"),
    [
        ('"es.shaping" = {low = 0, high = 1}', 'tune."es.shaping" is not an int or float key'),
        ('"es.antithetic" = {low = 0, high = 1}', 'tune."es.antithetic" is not an int or float key'),
        ('"settings.operators" = {low = 0, high = 1}', 'tune."settings.operators" is not an int or float key'),
        (
            '"es.sigmaa" = {low = 0.1, high = 1.0}',
            'tune."es.sigmaa": no field sigmaa in [es] (ESSettings); known: sigma, sigma_final, alpha,',
        ),
        (
            '"settings.batch" = {low = 1, high = 2}',
            'tune."settings.batch": no field batch in [settings] (CoevoSettings)',
        ),
        (
            '"es.strategy_options.top" = {low = 0.1, high = 1.0}',
            'tune."es.strategy_options.top": no field top in [es.strategy_options] (ARS.Settings); known: top_share',
        ),
        ('"es.sigma.low" = {low = 0.1, high = 1.0}', 'tune."es.sigma.low": es.sigma is a value, not a table'),
        ('"es.strategy_options" = {choices = [1]}', 'tune."es.strategy_options": es.strategy_options is a table'),
    ],
)
def test_a_path_off_its_model_or_a_range_on_a_key_that_is_no_number_fails_in_one_line(
    tmp_path: Path, tune: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        space_of(tmp_path, tune + "\n")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_settings_of_a_method_without_a_model_have_no_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r'^tune."settings.batch": no field batch in \[settings\] .*; known: none$'):
        space_of(tmp_path, '"settings.batch" = {low = 1, high = 2}\n', HEURISTIC.replace('"coevo"', '"eoh"'))


def test_the_exported_config_writes_a_table_within_a_table_as_toml_reads_it() -> None:
    data = {"method": "coevo", "es": {"sigma": 0.01, "strategy_options": {"top_share": 0.5}}}
    assert tomllib.loads(to_toml(data)) == data


EXPERIMENTS = Path(__file__).parent.parent / "experiments"


@pytest.mark.parametrize(
    "path", sorted(p for p in EXPERIMENTS.rglob("*.toml") if "\n[tune]" in p.read_text()), ids=lambda p: p.stem
)
def test_every_study_under_experiments_loads(path: Path) -> None:
    assert load_space(path).knobs
