"""experiments/configs/ holds one valid reference config per (task, reference AHD method), named after both."""

from __future__ import annotations

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
