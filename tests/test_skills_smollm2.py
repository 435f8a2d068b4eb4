"""The joint `coevo` method of the agent workload on the real SmolLM2-135M (slow: real episodes and
real trajectory analyses on CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.run.config import load_config
from coevo.run.session import start_run
from coevo.skills import load_library
from coevo.skills.pinning import RUN_LIBRARY_DIR

pytestmark = pytest.mark.slow

CONFIG = """
method = "coevo"
model = "smollm2-135m"
budget = 4
seed = 0
population_size = 2
[llm]
dtype = "float32"
[es]
sigma = 1e-3
alpha = 5e-4
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = 2
[settings]
analyses = 2
heldout_episodes = 2
"""


def test_coevo_on_smollm2_runs_two_generations_of_es_and_skill_edits(tmp_path: Path, one_torch_thread):
    path = tmp_path / "coevo.toml"
    path.write_text(CONFIG)
    with start_run(load_config(path), tmp_path / "run") as runner:
        base = runner.weights_sha256()
        runner.run()
        assert runner.generation == 3, "generation 0 and two joint generations"
        assert len(runner.store.es_records(0)) == 2 and runner.weights_sha256() != base
        assert load_library(tmp_path / "run" / RUN_LIBRARY_DIR).hash == runner.method.skills.library.hash
