"""The ES history replays to bit-identical weights, survives torn writes, and resumes a run exactly."""

import pytest
import torch
from torch import nn

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.es.update_log import ESHistory, replay


def make_model(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 32)).to(dtype)


PROBE = torch.arange(8).reshape(2, 4)


def reward(model: nn.Module) -> float:
    """Prefer a large logit for token 3: a smooth reward that every member moves a little."""
    with torch.no_grad():
        return float(model(PROBE)[..., 3].float().mean())


CONFIG = ESConfig(
    population_size=6,
    antithetic=True,
    sigma={"start": 0.05, "end": 0.01, "kind": "cosine"},
    alpha={"start": 0.02, "kind": "linear", "end": 0.005, "warmup_steps": 2},
    total_steps=20,
    shaping="centered_rank",
    optimizer={"kind": "adam", "weight_decay": 0.1},
    seed=11,
)


def train(engine: ESEngine, model: nn.Module, steps: int) -> None:
    for _ in range(steps):
        perturbations = engine.ask()
        rewards = []
        for index, p in enumerate(perturbations):
            with engine.host.perturbed(p):
                rewards.append(None if index == 1 else reward(model))  # one invalid member per step
        engine.tell(perturbations, rewards)


@pytest.mark.parametrize(
    ("dtype", "scope", "optimizer"),
    [
        (torch.float32, "full", {"kind": "adam", "weight_decay": 0.1}),
        (torch.float32, "full", {"momentum": 0.9}),
        (torch.bfloat16, "all_linear", {}),
    ],
)
def test_replay_after_20_updates_gives_bit_identical_weights(tmp_path, dtype, scope, optimizer):
    model = make_model(dtype)
    base_hash = TorchWeightsHost(make_model(dtype)).weights_sha256()
    config = ESConfig.model_validate({**CONFIG.model_dump(), "optimizer": optimizer})
    engine = ESEngine(config, TorchWeightsHost(model, scope=scope), ESHistory(tmp_path / "h.jsonl"))
    train(engine, model, 20)
    live_hash = engine.host.weights_sha256()
    assert live_hash != base_hash
    replayed = replay(make_model(dtype), ESHistory(tmp_path / "h.jsonl"))
    assert replayed.weights_sha256() == live_hash


def test_resume_after_a_crash_continues_as_if_uninterrupted(tmp_path):
    uninterrupted = make_model()
    engine = ESEngine(CONFIG, TorchWeightsHost(uninterrupted))
    train(engine, uninterrupted, 20)

    first_half = make_model()
    train(ESEngine(CONFIG, TorchWeightsHost(first_half), ESHistory(tmp_path / "h.jsonl")), first_half, 10)
    with open(tmp_path / "h.jsonl", "a") as file:
        file.write('{"step":10,"seeds":[1')  # a write cut off by the crash
    restarted = make_model()
    resumed = ESEngine.resume(CONFIG, TorchWeightsHost(restarted), ESHistory(tmp_path / "h.jsonl"))
    assert resumed.step == 10
    train(resumed, restarted, 10)
    assert resumed.host.weights_sha256() == engine.host.weights_sha256()
    assert len(ESHistory(tmp_path / "h.jsonl").load()) == 20


def test_history_records_what_the_update_was_made_of(tmp_path):
    model = make_model()
    engine = ESEngine(CONFIG, TorchWeightsHost(model), ESHistory(tmp_path / "h.jsonl"))
    train(engine, model, 1)
    (record,) = ESHistory(tmp_path / "h.jsonl").load()
    assert record.step == 0 and record.scope == "full" and record.noise_version == engine.host.noise_version
    assert len(record.seeds) == 6 and record.signs == (1, -1) * 3 and record.raw_rewards[1] is None
    assert record.sigma == pytest.approx(0.05) and record.update.optimizer == CONFIG.optimizer
    # mirrored pairs: the invalid member ranks below its mirror, and the residuals are kept beside the rewards
    assert record.shaped_rewards[1] < record.shaped_rewards[0]
    assert record.residuals[0] == -record.residuals[1] > 0
    assert [record.residuals[i] + record.residuals[i + 1] for i in (2, 4)] == pytest.approx([0, 0])
    assert record.residuals[2] == pytest.approx((record.raw_rewards[2] - record.raw_rewards[3]) / 2)


def test_history_rejects_gaps_and_corruption(tmp_path):
    path = tmp_path / "h.jsonl"
    model = make_model()
    train(ESEngine(CONFIG, TorchWeightsHost(model), ESHistory(path)), model, 2)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[1])
    with pytest.raises(ValueError, match="steps must run 0, 1"):
        ESHistory(path)
    path.write_text(lines[0] + "not json\n")
    with pytest.raises(ValueError, match="corrupt history line"):
        ESHistory(path)


def test_replay_refuses_a_host_with_another_scope(tmp_path):
    model = make_model()
    train(ESEngine(CONFIG, TorchWeightsHost(model), ESHistory(tmp_path / "h.jsonl")), model, 1)
    with pytest.raises(ValueError, match="scope"):
        replay(TorchWeightsHost(make_model(), scope="all_linear"), ESHistory(tmp_path / "h.jsonl"))
