"""The `grpo` baseline: refused in one line without the `rl` extra; real TRL steps on the tiny random
Llama (the run, its held-out lines, the refused resume) and on SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from coevo.cli import main
from coevo.run.config import load_config

CONFIG = """
method = "grpo"
model = "smollm2-135m"
budget = 2
seed = 0
population_size = 2
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
    assert err == (
        "coevo: error: method grpo needs the 'rl' extra: make rl (or pip install -e '.[rl]' -c constraints.txt)"
    )
    assert not (tmp_path / "r" / "run.sqlite").exists()


def test_importing_coevo_and_its_runner_does_not_import_trl():
    code = "import sys, coevo, coevo.cli, coevo.run.runner, coevo.run.method_registry; print('trl' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.slow
def test_grpo_on_the_tiny_model_trains_reports_its_steps_and_refuses_resume(tmp_path: Path, capsys, one_torch_thread):
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG.replace('"smollm2-135m"', '"tiny_lm:build_tiny_agent"').replace("budget = 2", "budget = 4"))
    run_dir = tmp_path / "r"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "base (0 GRPO steps) success on val: " in out
    assert "trained (2 GRPO steps) success on val: " in out
    assert "2 GRPO steps changed held-out success by " in out and "ES updates" not in out
    logged = [json.loads(line) for line in (run_dir / "grpo_history.jsonl").read_text().splitlines()]
    assert [entry["generation"] for entry in logged] == [1, 2] and all("loss" in entry for entry in logged)

    assert main(["resume", str(run_dir)]) == 2
    assert capsys.readouterr().err.strip() == (
        "coevo: error: a grpo run cannot be resumed after its 2 GRPO step(s); start it again"
    )


@pytest.mark.slow
def test_a_real_grpo_step_on_smollm2_changes_the_weights_and_records_the_run(config: Path, tmp_path: Path):
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    from coevo.run.session import start_run

    # 8 search episodes in groups of 4: SmolLM2 succeeds on a few of them at H=2, so some group's
    # rewards differ and its advantages are not all zero (a group that all fails teaches nothing)
    config.write_text(
        config.read_text()
        .replace("budget = 2", "budget = 4")
        .replace("population_size = 2", "population_size = 4")
        .replace("episodes = 2", "episodes = 8")
    )
    runner = start_run(load_config(config), tmp_path / "r")
    base_sha = runner.weights_sha256()
    with runner:
        runner.run()
        runner.record_heldout("after")
        trained_sha = runner.weights_sha256()
        state = runner.store.last_state()
    assert trained_sha != base_sha, "one GRPO step moved the weights"
    assert state["evaluations"] == 4 and state["weights_sha256"] == trained_sha
    assert state["heldout"]["before"] == {**state["heldout"]["before"], "episodes": 4, "updates": "0 GRPO steps"}
    assert runner.heldout["after"]["episodes"] == 4 and runner.heldout["after"]["updates"] == "1 GRPO steps"
    (logged,) = [json.loads(line) for line in (tmp_path / "r" / "grpo_history.jsonl").read_text().splitlines()]
    assert logged["generation"] == 1 and "loss" in logged and logged["reward_std"] > 0


def test_group_advantages_normalise_each_run_of_consecutive_rollouts():
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    import torch

    from coevo.rl.grpo_stepper import group_advantages

    advantages = group_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]), 4)
    assert torch.allclose(advantages[:4], torch.tensor([1.0, -1.0, 1.0, -1.0]) * 0.5 / (0.57735 + 1e-4), atol=1e-4)
    assert torch.equal(advantages[4:], torch.zeros(4)), "a group that all succeeded teaches nothing"


def test_setting_up_grpo_warns_of_nothing_and_keeps_activation_checkpointing_off(tmp_path: Path, one_torch_thread):
    """transformers deprecates `gradient_checkpointing` (TRL's default: on) for `activation_checkpointing`."""
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    from tiny_lm import build_terse_tiny_agent

    from coevo.rl.grpo_stepper import GRPOSettings, GRPOStepper

    llm = build_terse_tiny_agent()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stepper = GRPOStepper(llm, "gridnav", 2, 2, tmp_path, GRPOSettings(num_generations=4), seed=0)
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == []
    assert stepper.trainer.args.activation_checkpointing is False and not stepper.trainer.args.gradient_checkpointing


@pytest.mark.slow
def test_a_grpo_step_trains_every_turn_of_every_episode_with_its_episodes_advantage(tmp_path: Path, one_torch_thread):
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    from tiny_lm import build_terse_tiny_agent

    from coevo.rl.grpo_stepper import GRPOSettings, GRPOStepper

    llm = build_terse_tiny_agent()
    stepper = GRPOStepper(llm, "gridnav", 2, 2, tmp_path, GRPOSettings(num_generations=4, learning_rate=1e-2), seed=0)
    plays = []
    real_play = stepper.play
    stepper.play = lambda seeds: plays.append((list(seeds), *real_play(seeds))) or plays[-1][1:]
    before = [p.detach().clone() for p in llm.model.parameters()]
    metrics = stepper.step([0, 8])  # seeds whose rollouts succeed in some of each group (advantages not all 0)

    ((seeds, played, turns),) = plays
    assert sorted(seeds) == [0] * 4 + [8] * 4 and all(len(set(seeds[i : i + 4])) == 1 for i in (0, 4))
    assert metrics["turns_trained"] == sum(len(e.turns) for e in played) > len(played), "later turns are trained too"
    for episode, samples in zip(played, turns, strict=True):
        assert len(samples) == len(episode.turns)
        for turn, sample in zip(episode.turns, samples, strict=True):
            rendered = llm.render([{"role": "user", "content": turn.prompt}])
            assert sample.prompt_ids == llm.tokenizer(rendered, add_special_tokens=False)["input_ids"]
            assert llm.tokenizer.decode(sample.completion_ids, skip_special_tokens=True).startswith(turn.action)
    first_actions = [tuple(t.action for t in e.turns) for e in played[:4]]
    assert len(set(first_actions)) > 1, "a group's rollouts sample differently"
    assert any(not torch_equal(a, b) for a, b in zip(before, llm.model.parameters())), "the step moved the weights"


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b.detach())


@pytest.mark.slow
def test_the_loss_over_chunks_of_turns_gives_the_whole_batchs_gradient(tmp_path: Path, one_torch_thread):
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    import torch
    from tiny_lm import build_terse_tiny_agent

    from coevo.rl.grpo_stepper import GRPOSettings, GRPOStepper

    llm = build_terse_tiny_agent()
    stepper = GRPOStepper(llm, "gridnav", 2, 2, tmp_path, GRPOSettings(num_generations=4), seed=0)
    trainer = stepper.trainer
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps  # as `train()` sets it
    batch = trainer._generate_and_score_completions([{"seed": s, "prompt": stepper._prompt(s)} for s in [0] * 4 + [8] * 4])
    assert batch["advantages"].abs().sum() > 0 and batch["completion_ids"].size(0) > 8

    def loss_and_gradient(rows_per_chunk: int) -> tuple[float, list[torch.Tensor]]:
        trainer.args.per_device_train_batch_size = rows_per_chunk
        llm.model.train()
        llm.model.zero_grad()
        loss = trainer.compute_loss(llm.model, batch)
        trainer.accelerator.backward(loss)
        return loss.item(), [p.grad.clone() for p in llm.model.parameters() if p.grad is not None]

    whole_loss, whole = loss_and_gradient(10_000)
    chunked_loss, chunked = loss_and_gradient(3)
    assert chunked_loss == pytest.approx(whole_loss, rel=1e-4, abs=1e-6)
    assert len(chunked) == len(whole) and any(g.abs().sum() > 0 for g in whole)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(whole, chunked, strict=True))


@pytest.mark.slow
def test_grpo_trains_on_an_environment_from_a_users_file(tmp_path: Path, capsys, one_torch_thread):
    pytest.importorskip("trl", reason="the 'rl' extra (trl) is not installed")
    from test_plugins import COUNTER_ENV

    (tmp_path / "count.py").write_text(COUNTER_ENV)
    path = tmp_path / "tiny.toml"
    path.write_text(
        CONFIG.replace('"smollm2-135m"', '"tiny_lm:build_tiny_agent"')
        .replace("budget = 2", "budget = 4")
        .replace('env = "gridnav"\nhorizon = 2', 'env = "count.py:CountTo"')
        .replace("heldout_episodes = 4", "heldout_episodes = 1")
    )
    run_dir = tmp_path / "r"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "trained (2 GRPO steps) success on val: " in out
    assert len((run_dir / "grpo_history.jsonl").read_text().splitlines()) == 2
