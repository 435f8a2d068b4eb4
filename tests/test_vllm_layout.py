"""vLLM's fused layout gets exactly the ES noise of the canonical transformers parameters (no vLLM needed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fake_vllm import served_like_vllm
from tiny_lm import build_tiny_llama
from transformers import Qwen2Config, Qwen2ForCausalLM

from coevo.es.host import TorchWeightsHost
from coevo.es.noise import noise
from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Perturbation, Update
from coevo.llm import vllm as coevo_vllm
from coevo.llm.vllm import bind_canonical_views, map_canonical_to_served, meta_skeleton

LAYER = "model.layers.1"


def _tiny_qwen2(vocab_size: int = 50) -> Qwen2ForCausalLM:
    """Qwen2 differs from Llama by the q/k/v biases, which vLLM fuses too."""
    torch.manual_seed(1)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).eval()


@pytest.mark.parametrize("build", [lambda: build_tiny_llama(50), _tiny_qwen2], ids=["llama", "qwen2"])
def test_fused_tensors_hold_their_parts_in_order(build) -> None:
    model = build()
    canonical = {n: tuple(p.shape) for n, p in model.named_parameters()}
    served = {n: tuple(t.shape) for n, t in served_like_vllm(model).items()}

    layout = map_canonical_to_served(canonical, served)

    assert set(layout) == set(canonical)
    q, k, v = (layout[f"{LAYER}.self_attn.{p}_proj.weight"] for p in "qkv")
    assert {q.served, k.served, v.served} == {f"{LAYER}.self_attn.qkv_proj.weight"}
    assert (q.start, k.start, v.start) == (0, q.numel, q.numel + k.numel)
    gate, up = layout[f"{LAYER}.mlp.gate_proj.weight"], layout[f"{LAYER}.mlp.up_proj.weight"]
    assert gate.served == up.served == f"{LAYER}.mlp.gate_up_proj.weight" and (gate.start, up.start) == (0, gate.numel)
    assert layout["model.embed_tokens.weight"].start == 0
    if isinstance(model, Qwen2ForCausalLM):
        q_bias, k_bias = layout[f"{LAYER}.self_attn.q_proj.bias"], layout[f"{LAYER}.self_attn.k_proj.bias"]
        assert q_bias.served == f"{LAYER}.self_attn.qkv_proj.bias" and k_bias.start == q_bias.numel


def test_fused_noise_is_the_concatenated_canonical_noise() -> None:
    model = _tiny_qwen2()
    served = {n: torch.zeros_like(t) for n, t in served_like_vllm(model).items()}
    host = TorchWeightsHost(bind_canonical_views(meta_skeleton(model.config), served))
    seed = 12345

    host.perturb(Perturbation(seed=seed, sigma=1.0))  # zeros + 1 * eps: the served tensors now hold eps

    for module, parts in (("self_attn.qkv_proj", "qkv"), ("mlp.gate_up_proj", ("gate", "up"))):
        for leaf in ("weight", "bias") if module.startswith("self_attn") else ("weight",):
            names = [f"{LAYER}.{module.split('.')[0]}.{p}_proj.{leaf}" for p in parts]
            expected = np.concatenate([noise(seed, n, model.get_parameter(n).numel()) for n in names])
            np.testing.assert_array_equal(served[f"{LAYER}.{module}.{leaf}"].numpy().reshape(-1), expected)
    embed = served["model.embed_tokens.weight"]
    vocab = model.config.vocab_size
    expected_embed = noise(seed, "model.embed_tokens.weight", embed[:vocab].numel())
    np.testing.assert_array_equal(embed[:vocab].numpy().reshape(-1), expected_embed)
    assert not embed[vocab:].any()  # padding rows are no weight and get no noise


def test_served_weights_move_exactly_like_the_transformers_model() -> None:
    model = build_tiny_llama(50).to(torch.bfloat16)  # tied embeddings; bf16 as vLLM serves it
    served = served_like_vllm(model)
    original = {n: t.clone() for n, t in served.items()}
    reference = TorchWeightsHost(model)
    host = TorchWeightsHost(bind_canonical_views(meta_skeleton(model.config), served))
    perturbation = Perturbation(seed=7, sigma=0.05, sign=-1)
    update = Update(seeds=(3, 4), coeffs=(0.7, -1.2), alpha=0.01, optimizer=OptimizerConfig(kind="adam"))

    assert host.parameter_names == reference.parameter_names
    with host.perturbed(perturbation), reference.perturbed(perturbation):
        perturbed = served_like_vllm(model)
        for name, tensor in served.items():
            assert torch.equal(tensor[: perturbed[name].shape[0]], perturbed[name]), name
            assert not torch.equal(tensor, original[name]), name
    for name, tensor in served.items():
        assert torch.equal(tensor, original[name]), f"{name} not restored exactly"

    host.apply_update(update)
    reference.apply_update(update)
    assert host.weights_sha256() == reference.weights_sha256()


def test_a_tensor_of_the_wrong_size_is_a_one_line_error() -> None:
    model = build_tiny_llama(50)
    canonical = {n: tuple(p.shape) for n, p in model.named_parameters()}
    served = {n: tuple(t.shape) for n, t in served_like_vllm(model).items()}
    fused = f"{LAYER}.self_attn.qkv_proj.weight"
    served[fused] = (served[fused][0] // 2, served[fused][1])  # a tensor-parallel shard

    with pytest.raises(ValueError, match="tensor parallelism") as info:
        map_canonical_to_served(canonical, served)
    assert "\n" not in str(info.value)


def test_a_parameter_vllm_does_not_hold_is_an_error() -> None:
    model = build_tiny_llama(50)
    canonical = {n: tuple(p.shape) for n, p in model.named_parameters()}
    served = {n: tuple(t.shape) for n, t in served_like_vllm(model).items() if not n.endswith("norm.weight")}

    with pytest.raises(ValueError, match="have no vLLM tensor"):
        map_canonical_to_served(canonical, served)


def test_backend_without_vllm_says_how_to_install_it() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"venv of its own: there `pip install vllm`"):
            coevo_vllm.VLLMBackend("any-model")
    else:
        pytest.skip("vLLM is installed: the GPU check experiments/bench/vllm_check.py covers the backend")
