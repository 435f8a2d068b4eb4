"""A stand-in for the `vllm` package: an engine that stores weights as vLLM does and answers like ScriptedLLM.

`FakeEngine` loads a transformers model directory into vLLM's layout (q|k|v and gate|up fused on dim 0,
vocabulary padded), mixes the worker extension named by `worker_extension_cls` into its worker class
as vLLM does, and serves `collective_rpc` and `chat`. To answer, it unfuses its served tensors (its own
code, independent of coevo's mapping) into a transformers model and runs that model's forward pass,
so an answer depends on the weights the engine really holds: a perturbation that misses the served
tensors, or an update applied twice, changes what the run sees and what it ends with.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scripted_llm import ScriptedLLM
from transformers import AutoConfig, AutoModelForCausalLM

VOCAB_PADDING = 64  # vLLM pads embedding rows to a multiple of this
FUSED = {
    "q_proj": ("qkv_proj", ("q_proj", "k_proj", "v_proj")),
    "gate_proj": ("gate_up_proj", ("gate_proj", "up_proj")),
}


def served_like_vllm(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights as vLLM stores them: q|k|v and gate|up concatenated, vocabulary padded."""
    params = dict(model.named_parameters())  # tied weights appear once, as in vLLM
    served: dict[str, torch.Tensor] = {}
    for name, tensor in params.items():
        module, leaf = name.rsplit(".", 1)
        prefix, _, module_name = module.rpartition(".")
        data = tensor.detach().clone()
        if module_name in FUSED:
            fused, parts = FUSED[module_name]
            served[f"{prefix}.{fused}.{leaf}"] = torch.cat([params[f"{prefix}.{p}.{leaf}"].detach() for p in parts])
        elif module_name in ("k_proj", "v_proj", "up_proj"):
            continue
        elif module_name in ("embed_tokens", "lm_head"):
            padded_rows = -(-data.shape[0] // VOCAB_PADDING) * VOCAB_PADDING
            served[name] = torch.cat([data, data.new_zeros(padded_rows - data.shape[0], *data.shape[1:])])
        else:
            served[name] = data
    return served


def unfused_state(served: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """The transformers state dict that `served` holds (the inverse of `served_like_vllm`)."""
    head_dim = config.hidden_size // config.num_attention_heads
    rows = {
        "qkv_proj": [config.num_attention_heads * head_dim, *[config.num_key_value_heads * head_dim] * 2],
        "gate_up_proj": [config.intermediate_size] * 2,
    }
    state: dict[str, torch.Tensor] = {}
    for name, tensor in served.items():
        module, leaf = name.rsplit(".", 1)
        prefix, _, module_name = module.rpartition(".")
        if module_name in rows:
            parts = next(parts for fused, parts in FUSED.values() if fused == module_name)
            for part, piece in zip(parts, torch.split(tensor, rows[module_name])):
                state[f"{prefix}.{part}.{leaf}"] = piece
        elif module_name in ("embed_tokens", "lm_head"):
            state[name] = tensor[: config.vocab_size]
        else:
            state[name] = tensor
    return state


def _module_holding(tensors: dict[str, torch.Tensor]) -> torch.nn.Module:
    """An nn.Module whose named_parameters() are exactly `tensors` (sharing their memory)."""
    root = torch.nn.Module()
    for name, tensor in tensors.items():
        *path, leaf = name.split(".")
        node = root
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        node.register_parameter(leaf, torch.nn.Parameter(tensor, requires_grad=False))
    return root


def dispatch_cpu_unquantized_gemm(layer: torch.nn.Module, remove_weight: bool) -> None:
    """vLLM's CPU GEMM dispatch as it behaves: the matmul reads a packed copy taken now; the weight
    itself may be dropped (an empty tensor)."""
    layer.cpu_linear = layer.weight.detach().clone()
    if remove_weight:
        layer.weight = torch.nn.Parameter(torch.empty(0, dtype=layer.weight.dtype), requires_grad=False)


class FakeWorkerBase:
    """What the worker extension relies on in a vLLM worker: `get_model()` and `model_config`.

    With `prepack` the worker behaves as vLLM on CPU: every linear layer keeps only a packed copy of its
    weight, which the forward pass reads (`served_for_forward`).
    """

    def __init__(self, model_dir: str, prepack: bool) -> None:
        self.model_config = types.SimpleNamespace(hf_config=AutoConfig.from_pretrained(model_dir), model=model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self._model = _module_holding(served_like_vllm(model))
        if prepack:
            for name, module in self._model.named_modules():
                if name.endswith("_proj"):
                    dispatch_cpu_unquantized_gemm(module, remove_weight=True)

    def get_model(self) -> torch.nn.Module:
        return self._model

    def served_for_forward(self) -> dict[str, torch.Tensor]:
        """The tensors the forward pass multiplies by: the packed copy where a layer has one."""
        served = {}
        for name, module in self._model.named_modules():
            for leaf, tensor in module.named_parameters(recurse=False):
                pack = getattr(module, "cpu_linear", None)
                served[f"{name}.{leaf}"] = pack if pack is not None and leaf == "weight" else tensor.detach()
        return served


@dataclass
class FakeSamplingParams:
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: list[str]


class FakeEngine:
    """`vllm.LLM` as the backend uses it; `weights_seen` lists a digest of the served weights per request."""

    created: list[FakeEngine] = []

    prepack = False
    """Behave as vLLM on CPU (see `FakeWorkerBase`); tests set it with the CPU platform."""

    def __init__(self, model: str, *, worker_extension_cls: str, enable_prefix_caching: bool, **options: Any) -> None:
        module_name, _, class_name = worker_extension_cls.rpartition(".")
        extension = getattr(importlib.import_module(module_name), class_name)
        self.worker = type("Worker", (FakeWorkerBase, extension), {})(model, self.prepack)
        self.options = {"enable_prefix_caching": enable_prefix_caching, **options}
        self.reference = AutoModelForCausalLM.from_config(self.worker.model_config.hf_config).eval()
        self.weights_seen: list[str] = []
        FakeEngine.created.append(self)

    def collective_rpc(self, method: str, timeout: float | None = None, args: tuple = (), kwargs: dict | None = None):
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def served_digest(self) -> str:
        """A digest of the weights the forward pass uses."""
        digest = hashlib.sha256()
        for name, tensor in self.worker.served_for_forward().items():
            digest.update(name.encode() + tensor.numpy().tobytes())
        return digest.hexdigest()[:16]

    def chat(
        self, conversations: Sequence[Sequence[dict]], params: Sequence[FakeSamplingParams], use_tqdm: bool = True
    ):
        served = self.worker.served_for_forward()
        self.reference.load_state_dict(unfused_state(served, self.reference.config), strict=False)
        self.reference.tie_weights()
        outputs = []
        for messages, sampling in zip(conversations, params):
            text = "".join(m["content"] for m in messages)
            digest = hashlib.sha256(f"{text}|{sampling.seed}".encode()).digest()
            tokens = torch.tensor([[b % self.reference.config.vocab_size for b in digest[:8]]])
            with torch.no_grad():
                logits = self.reference(tokens).logits[0, -1].numpy()
            answer = ScriptedLLM._answer(messages, np.tanh(logits[:2] * 20.0))
            self.weights_seen.append(self.served_digest())
            completion = types.SimpleNamespace(
                text=answer.text, token_ids=[0] * answer.completion_tokens, finish_reason="stop"
            )
            outputs.append(types.SimpleNamespace(prompt_token_ids=[0] * answer.prompt_tokens, outputs=[completion]))
        return outputs


def fake_vllm_modules(cpu: bool) -> dict[str, types.ModuleType]:
    """Modules to put in sys.modules: `vllm` (findable by importlib.util.find_spec, with LLM and
    SamplingParams), `vllm.platforms` (a CPU or a GPU platform) and the CPU GEMM dispatch."""
    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM = FakeEngine
    module.SamplingParams = FakeSamplingParams
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: cpu)
    layers = types.ModuleType("vllm.model_executor.layers.utils")
    layers.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm
    return {"vllm": module, "vllm.platforms": platforms, "vllm.model_executor.layers.utils": layers}
