"""`TorchWeightsHost`: perturb, restore and update the weights of any torch.nn.Module in place.

Noise is keyed by each parameter's canonical name (the first name torch gives it; tied weights are
evolved once) and flat element index, so the same seed moves the same weights in every layout.

Restore modes:
- "exact" (default): an fp32 master copy in host memory is the truth; perturbed weights are written as
  cast(master + sigma * eps) and restore copies the master back, so any number of cycles leaves the
  weights bit-identical and bf16/fp16 weights keep the full fp32 update signal. Costs one fp32 copy of
  the evolved parameters. A module cast down with `compute_in` keeps its fp32 values as that master,
  shared by every host over it, so a bf16 compute copy moves exactly as the fp32 weights would.
- "inplace": add then subtract the same noise in the weights' own memory (inference-level memory).
  Only for CPU float32 weights, where the round-off drift is tiny and measured; on bf16 it would erase
  most of an update (bf16 keeps 8 bits of mantissa), so it is refused there.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal
from weakref import WeakKeyDictionary

import numpy as np
import torch
from torch import nn

from coevo.es.noise import NOISE_VERSION, noise_key, perturb_, perturb_all_
from coevo.es.optim import ParamState, apply_update_
from coevo.es.perturbation import Perturbation, PerturbedContext, Update

RestoreMode = Literal["exact", "inplace"]


def canonical_parameters(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """Every distinct parameter once, under its first name; tied weights (same memory) collapse to one."""
    seen: set[tuple[int, tuple[int, ...], torch.dtype]] = set()
    distinct = []
    for name, param in module.named_parameters():
        identity = (param.data_ptr(), tuple(param.shape), param.dtype)
        if identity in seen:
            continue
        seen.add(identity)
        distinct.append((name, param))
    return distinct


def select_parameters(module: nn.Module, scope: str) -> list[tuple[str, nn.Parameter]]:
    """The floating-point parameters a scope evolves: "full", "all_linear" (no embeddings, lm_head,
    norms) or a regex searched in canonical names."""
    candidates = [(n, p) for n, p in canonical_parameters(module) if p.is_floating_point()]
    if scope == "full":
        selected = candidates
    elif scope == "all_linear":
        linear = _linear_parameter_pointers(module)
        selected = [(n, p) for n, p in candidates if p.data_ptr() in linear]
    else:
        try:
            pattern = re.compile(scope)
        except re.error as error:
            raise ValueError(f"scope {scope!r} is neither 'full', 'all_linear' nor a valid regex: {error}") from None
        selected = [(n, p) for n, p in candidates if pattern.search(n)]
    if not selected:
        raise ValueError(f"scope {scope!r} selects no floating-point parameter of {type(module).__name__}")
    return selected


def _linear_parameter_pointers(module: nn.Module) -> set[int]:
    """Parameters of nn.Linear layers other than the output head and heads tied to an embedding."""
    embedding_weights = {m.weight.data_ptr() for m in module.modules() if isinstance(m, nn.Embedding)}
    get_head = getattr(module, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    return {
        p.data_ptr()
        for name, m in module.named_modules()
        if isinstance(m, nn.Linear)
        and m is not head
        and name.split(".")[-1] != "lm_head"
        and m.weight.data_ptr() not in embedding_weights
        for p in m.parameters(recurse=False)
    }


@dataclass
class _SharedMaster:
    """The fp32 truth of one parameter of a module computing in lower precision."""

    values: np.ndarray  # flat fp32
    version: int
    """The live tensor's `_version` when a host last wrote the cast of `values` into it: any other
    version means someone else wrote the weights since, and `values` no longer describe them."""


_SHARED_MASTERS: WeakKeyDictionary[nn.Module, dict[str, _SharedMaster]] = WeakKeyDictionary()


def compute_in(module: nn.Module, dtype: torch.dtype) -> None:
    """Cast `module`'s floating-point weights to `dtype` for computing, keeping their fp32 values as the
    master every exact host over `module` starts from and moves (a no-op for float32)."""
    if dtype == torch.float32:
        return
    fp32 = {
        name: param.detach().to(device="cpu", dtype=torch.float32, copy=True).numpy().reshape(-1)
        for name, param in canonical_parameters(module)
        if param.is_floating_point()
    }
    module.to(dtype)
    _SHARED_MASTERS[module] = {
        name: _SharedMaster(fp32[name], param._version) for name, param in canonical_parameters(module) if name in fp32
    }


@dataclass
class _EvolvedTensor:
    name: str
    tensor: torch.Tensor
    direct: np.ndarray | None  # flat fp32 view of the tensor's own memory (CPU float32 only)
    master: np.ndarray | None  # flat fp32 truth in "exact" mode
    state: ParamState
    shared: _SharedMaster | None = None  # the module's fp32 master (`compute_in`), which `master` views


class TorchWeightsHost(PerturbedContext):
    """A `WeightsHost` for a torch.nn.Module (transformers models included); see the module docstring.

    From construction on the host owns the evolved weights: in "exact" mode the master copy is the
    truth, so weights changed behind its back are overwritten at the next restore or update.
    """

    noise_version = NOISE_VERSION

    def __init__(self, module: nn.Module, scope: str = "full", restore: RestoreMode = "exact") -> None:
        if restore not in ("exact", "inplace"):
            raise ValueError(f"restore must be 'exact' or 'inplace', got {restore!r}")
        self.module = module
        self.scope = scope
        shared = _SHARED_MASTERS.get(module, {})
        self._tensors = [
            self._track(name, param, restore, shared.get(name)) for name, param in select_parameters(module, scope)
        ]
        self._scratch = np.empty(0, dtype=np.float32)
        self._active: Perturbation | None = None

    @staticmethod
    def _track(name: str, param: nn.Parameter, restore: RestoreMode, shared: _SharedMaster | None) -> _EvolvedTensor:
        tensor = param.detach()
        if not tensor.is_contiguous():
            raise ValueError(f"parameter {name} is not contiguous; flat noise indices need a row-major layout")
        direct = tensor.numpy().reshape(-1) if tensor.device.type == "cpu" and tensor.dtype == torch.float32 else None
        if restore == "inplace" and direct is None:
            raise ValueError(
                f"restore='inplace' needs CPU float32 weights but {name} is {tensor.dtype} on {tensor.device}: "
                "subtracting the noise again in low precision rounds most of each update away; use restore='exact'"
            )
        if restore == "inplace":
            return _EvolvedTensor(name, tensor, direct, None, ParamState())
        if shared is None:
            return _EvolvedTensor(name, tensor, direct, _fp32_copy(tensor), ParamState())
        if shared.version != tensor._version:  # written behind the hosts' back: the live weights are the truth
            shared.values, shared.version = _fp32_copy(tensor), tensor._version
        return _EvolvedTensor(name, tensor, direct, shared.values, ParamState(), shared)

    @property
    def parameter_names(self) -> list[str]:
        """Canonical names of the evolved parameters, in noise-key order."""
        return [t.name for t in self._tensors]

    @property
    def num_evolved(self) -> int:
        """Number of evolved scalar weights (tied weights counted once)."""
        return sum(t.tensor.numel() for t in self._tensors)

    @property
    def active(self) -> Perturbation | None:
        """The perturbation currently applied, if any."""
        return self._active

    def perturb(self, perturbation: Perturbation) -> None:
        """Set the weights to theta + sign * sigma * eps(seed)."""
        if self._active is not None:
            raise RuntimeError(f"already perturbed by {self._active}; call restore() first")
        scale = perturbation.sign * perturbation.sigma
        in_memory = []  # weights numpy can write: one pass over all of them, shared by the threads
        for t in self._tensors:
            key = noise_key(perturbation.seed, t.name)
            if t.direct is not None:
                in_memory.append((t.direct, t.direct if t.master is None else t.master, key))
            else:
                buffer = self._scratch_for(t.master.size)
                perturb_(buffer, t.master, key, scale)
                self._write_back(t, buffer)
        perturb_all_(in_memory, scale)
        self._active = perturbation

    def restore(self) -> None:
        """Return to theta: copy the master back ("exact") or subtract the same noise ("inplace")."""
        if self._active is None:
            raise RuntimeError("restore() without an active perturbation")
        in_place = []
        for t in self._tensors:
            if t.master is None:
                in_place.append((t.direct, t.direct, noise_key(self._active.seed, t.name)))
            else:
                self._write_back(t, t.master)
        perturb_all_(in_place, -self._active.sign * self._active.sigma)
        self._active = None

    def apply_update(self, update: Update) -> None:
        """Move theta by one ES step in fp32 (into the master in "exact" mode, then cast back)."""
        if self._active is not None:
            raise RuntimeError(f"apply_update() while perturbed by {self._active}; call restore() first")
        for t in self._tensors:
            target = t.direct if t.master is None else t.master
            apply_update_(target, t.name, update, t.state)
            if t.master is not None:
                self._write_back(t, t.master)

    def weights_sha256(self) -> str:
        """SHA-256 over every distinct parameter's name, dtype, shape and bytes (evolved or not)."""
        digest = hashlib.sha256()
        for name, param in canonical_parameters(self.module):
            data = param.detach().cpu().contiguous()
            digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}\n".encode())
            digest.update(data.reshape(-1).view(torch.uint8).numpy())
        return digest.hexdigest()

    def _scratch_for(self, size: int) -> np.ndarray:
        if self._scratch.size < size:
            self._scratch = np.empty(size, dtype=np.float32)
        return self._scratch[:size]

    @staticmethod
    def _write_back(t: _EvolvedTensor, values: np.ndarray) -> None:
        if t.direct is not None:
            np.copyto(t.direct, values)
        else:
            t.tensor.copy_(torch.from_numpy(values).view(t.tensor.shape))
            if t.shared is not None:
                t.shared.version = t.tensor._version


def _fp32_copy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.to(device="cpu", dtype=torch.float32, copy=True).numpy().reshape(-1)
