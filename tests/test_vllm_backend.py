"""`llm.backend = "vllm"` through the config, `load_llm` and the runner, on a fake vLLM engine (no vLLM needed).

The fake (tests/fake_vllm.py) holds weights in vLLM's fused layout and answers from a forward pass of
those weights, so these tests fail if ES perturbs, restores or updates anything but the engine's own
tensors. The real engine is checked by experiments/bench/vllm_check.py (`make vllm-cpu-check`).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_capture import run_cli
from fake_vllm import FakeEngine, fake_vllm_modules, unfused_state
from tiny_lm import build_tiny_llama
from transformers import AutoModelForCausalLM

from coevo.es.host import TorchWeightsHost
from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Perturbation, Update
from coevo.es.update_log import replay
from coevo.llm.vllm import INSTALL_HINT, VLLMBackend, VLLMWeightsHost
from coevo.run.config import ConfigError, validate
from coevo.run.session import start_run
from coevo.run.store import RunStore

VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None


@pytest.fixture(params=["gpu", "cpu"])
def fake_vllm(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fake vLLM on a GPU platform, or on CPU, where linear layers keep only packed weights."""
    cpu = request.param == "cpu"
    for name, module in fake_vllm_modules(cpu).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(FakeEngine, "created", [])
    monkeypatch.setattr(FakeEngine, "prepack", cpu)
    for variable in ("VLLM_LOGGING_LEVEL", "VLLM_CPU_KVCACHE_SPACE"):  # set here so the backend's defaults can't leak
        monkeypatch.setenv(variable, os.environ.get(variable, ""))
    return request.param


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    target = tmp_path / "tiny-llama"
    build_tiny_llama(50).save_pretrained(target)
    return target


def _config(model_dir: Path, **changes) -> dict:
    return {
        "method": "eoh+es",
        "task": "tsp_construct",
        "model": str(model_dir),
        "budget": 14,
        "seed": 5,
        "population_size": 4,
        "eval": {"limit": 3, "workers": 1},
        "es": {"sigma": 0.05, "alpha": 0.5},
        "llm": {"backend": "vllm"},
        **changes,
    }


def test_a_vllm_run_moves_the_engines_weights_and_replays_to_their_hash(
    tmp_path: Path, fake_vllm: str, model_dir: Path
) -> None:
    # 22 evaluations leave an m1 or m2 step its 4 members whether or not the crossovers ran
    runner = start_run(validate(_config(model_dir, budget=22)), tmp_path / "run")
    (engine,) = FakeEngine.created
    base = engine.served_digest()
    assert isinstance(runner.host, VLLMWeightsHost) and runner.host.engines == [engine]
    assert engine.options["enable_prefix_caching"] is False and engine.options["seed"] == 5
    assert engine.options.get("enforce_eager") is (True if fake_vllm == "cpu" else None)

    runner.run()

    records = RunStore.open(tmp_path / "run").es_records()
    assert any(r.update is not None for r in records)
    assert engine.served_digest() != base, "the updates reached the engine's tensors"
    members = set(engine.weights_seen) - {base}
    assert len(members) >= 4, "members generated under their own perturbed weights"
    fresh = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    assert replay(fresh, records).weights_sha256() == runner.host.weights_sha256()
    computed_with = unfused_state(engine.worker.served_for_forward(), fresh.config)
    for name, param in fresh.named_parameters():
        assert torch.equal(computed_with[name], param.detach()), f"the engine multiplies by a stale {name}"


def test_every_replica_replays_the_same_seeds(fake_vllm: str, model_dir: Path) -> None:
    extension = "coevo.llm.vllm.CoevoWorkerExtension"
    engines = [FakeEngine(str(model_dir), worker_extension_cls=extension, enable_prefix_caching=False) for _ in "ab"]
    host = VLLMWeightsHost(engines, scope="all_linear")
    reference = TorchWeightsHost(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), "all_linear")
    base, base_digest = host.weights_sha256(), engines[0].served_digest()
    update = Update(seeds=(3, 4), coeffs=(0.7, -1.2), alpha=0.05, optimizer=OptimizerConfig(kind="adam"))

    with host.perturbed(Perturbation(seed=9, sigma=0.1)):
        assert engines[0].served_digest() == engines[1].served_digest() != base_digest
        assert host.weights_sha256() != base
    assert host.weights_sha256() == base == reference.weights_sha256()
    host.apply_update(update)
    reference.apply_update(update)
    assert host.weights_sha256() == reference.weights_sha256() != base

    engines[1].worker.get_model().model.norm.weight.data.add_(1.0)  # a replica that drifted
    with pytest.raises(RuntimeError, match="disagree on the weights hash"):
        host.weights_sha256()


def test_the_backend_refuses_what_the_engine_cannot_evolve(fake_vllm: str, model_dir: Path) -> None:
    backend = VLLMBackend(str(model_dir), scope="all_linear")
    assert backend.weights_host("all_linear") is backend.host
    with pytest.raises(ValueError, match="full-rank members only"):
        backend.weights_host("all_linear", rank=4)
    with pytest.raises(ValueError, match="loaded with scope 'all_linear'"):
        backend.weights_host("full")
    with pytest.raises(ValueError, match="prefix caching"):
        VLLMBackend(str(model_dir), enable_prefix_caching=True)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"es": {"rank": 4, "scope": "all_linear"}}, "full-rank members only"),
        ({"llm": {"backend": "vllm", "api_base": "http://localhost:1"}}, "drop llm.api_base"),
        ({"llm": {"engine_options": {"dtype": "float32"}}}, "the transformers backend takes none, got dtype"),
        ({"llm": {"backend": "vllm", "engine_options": {"max_model_len": 0}}}, "llm.engine_options.max_model_len: "),
    ],
)
def test_vllm_settings_that_cannot_run_are_config_errors(
    fake_vllm: str, model_dir: Path, changes: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        validate(_config(model_dir, **changes))


@pytest.mark.skipif(VLLM_INSTALLED, reason="vLLM is installed here")
def test_without_vllm_a_vllm_config_exits_2_naming_the_extra(
    tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(
        f'method = "eoh+es"\ntask = "tsp_construct"\nmodel = "{model_dir}"\nbudget = 4\n[llm]\nbackend = "vllm"\n'
    )
    code, _, err = run_cli(capsys, "run", str(config), "--run-dir", str(tmp_path / "run"))
    assert code == 2
    assert err.strip().count("\n") == 0 and INSTALL_HINT in err and "coevo[vllm]" not in err
    assert "own venv" in (Path(__file__).parents[1] / "docs" / "llm.md").read_text(), "the docs say the same"
    assert not (tmp_path / "run").exists()


def test_importing_coevo_never_imports_vllm() -> None:
    probe = (
        "import sys, coevo.cli, coevo.run.session, coevo.run.runner, coevo.llm.vllm, coevo.llm.hf; "
        "sys.exit(int('vllm' in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", probe], timeout=120).returncode == 0
