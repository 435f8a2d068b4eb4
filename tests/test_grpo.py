"""The `grpo` baseline: refused in one line without the `rl` extra, and a real TRL step on SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coevo.cli import main
from coevo.run.config import load_config

CONFIG = """
method = "grpo"
model = "smollm2-135m"
budget = 4
seed = 0
population_size = 4
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = 2
heldout_episodes = 4
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "grpo.toml"
    path.write_text(CONFIG)
    return path


def test_grpo_without_the_rl_extra_exits_2_with_one_line(config: Path, tmp_path: Path, capsys, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real_find_spec(name, *a))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "coevo: error: method grpo needs the 'rl' extra: pip install 'coevo[rl]'"
    assert not (tmp_path / "r" / "run.sqlite").exists()


def test_importing_coevo_and_its_runner_does_not_import_trl():
    code = "import sys, coevo, coevo.cli, coevo.run.runner, coevo.run.methods; print('trl' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.slow
def test_a_real_grpo_step_on_smollm2_changes_the_weights_and_records_the_run(config: Path, tmp_path: Path):
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    from coevo.run.heldout import record_heldout
    from coevo.run.session import start_run

    runner = start_run(load_config(config), tmp_path / "r")
    base_sha = runner.weights_sha256()
    with runner:
        runner.run()
        record_heldout(runner, "after")
        trained_sha = runner.weights_sha256()
        state = runner.store.last_state()
    assert trained_sha != base_sha, "one GRPO step moved the weights"
    assert state["evaluations"] == 4 and state["weights_sha256"] == trained_sha
    assert state["heldout"]["before"]["episodes"] == 4
    assert runner.heldout["after"]["episodes"] == 4
    (logged,) = [json.loads(line) for line in (tmp_path / "r" / "grpo_history.jsonl").read_text().splitlines()]
    assert logged["generation"] == 1 and "loss" in logged
