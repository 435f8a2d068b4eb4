"""experiments/configs/ holds one valid reference config per (task, reference AHD method), named after both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevo.run.config import load_config
from tasks import TASK_NAMES

CONFIGS = Path(__file__).resolve().parents[1] / "experiments" / "configs"
REFERENCE_METHODS = ("sample", "eoh", "sample+es", "eoh+es", "coevo")
"""The methods of the reference grid (REFERENCES.md section 1, and coevo against them)."""


def config_name(task: str, method: str) -> str:
    return f"{task}__{method.replace('+', '_')}.toml"


def test_every_task_and_method_has_exactly_one_config() -> None:
    expected = {config_name(task, method) for task in TASK_NAMES for method in REFERENCE_METHODS}
    assert {path.name for path in CONFIGS.glob("*.toml")} == expected


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.toml")), ids=lambda path: path.stem)
def test_config_loads_and_matches_its_file_name(path: Path) -> None:
    config = load_config(path)
    assert config_name(config.task, config.method) == path.name
    assert config.model == "smollm2-135m"
    assert (config.budget, config.population_size) == (1000, 10)
    if config.method.startswith("sample"):
        assert config.settings == {"batch": 20}
    if config.uses_weights:
        assert (config.es.sigma, config.es.sigma_final, config.es.alpha) == (1e-3, 0.0, 5e-4)
        assert config.es.directions_per_parent == 1


MINUTES = CONFIGS.parent / "minutes.toml"


def test_the_try_it_in_minutes_config_is_small_and_runs_end_to_end(tmp_path: Path, capsys, monkeypatch) -> None:
    from coevo.cli import main

    config = load_config(MINUTES)
    assert config.budget <= 8 and config.population_size <= 2 and config.finalists <= 2
    assert config.eval.limit <= 4 and config.settings["batch"] == 1 and config.llm.max_new_tokens <= 256
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    run_dir = tmp_path / "r"
    assert main(["run", str(MINUTES), "--run-dir", str(run_dir), "--set", "model=scripted_llm:build"]) == 0
    assert "(chosen on the val split)" in capsys.readouterr().out
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["status"], facts["evaluations"]) == ("finished", config.budget)
