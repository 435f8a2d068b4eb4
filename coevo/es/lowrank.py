"""EGGROLL-style low-rank ES: N members decode in ONE batch, each under its own perturbation.

Member i perturbs every evolved linear weight W (out x in) by sigma_i E_i, E_i = A_i B_i^T / sqrt(r),
with A_i (out x r) and B_i (in x r) drawn from the same counter-based noise as full-rank ES under the
keys f"{name}.lowrank_A" and f"{name}.lowrank_B". During a batched rollout E_i is never materialised:
a forward hook adds (sign_i sigma_i / sqrt r) (x B_i) A_i^T to the layer's output for the rows of
member i, O(r (in + out)) per token instead of one full weight pass per member. The update
alpha sum_i c_i A_i B_i^T / sqrt(r) has rank N r, so it is added to the weights as a dense fp32 matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from weakref import WeakKeyDictionary

import numpy as np
import torch
from torch import nn

from coevo.es.host import TorchWeightsHost, select_parameters
from coevo.es.noise import NOISE_VERSION, noise
from coevo.es.perturbation import Perturbation, PerturbedContext, Update

_ROW_MEMBERS: WeakKeyDictionary[nn.Module, tuple[str, ...]] = WeakKeyDictionary()
"""Module -> the weights tag of each row of its member map, while a `population()` block is open."""


def row_weights(module: nn.Module, batch: int) -> list[str] | None:
    """Which member each of `batch` rows of a forward pass on `module` runs under (its weights tag),
    extended as the hooks extend the member map; None outside `LowRankHost.population`.

    The weights stay the base's during a batched rollout, so a backend that names its weights by
    reading them must add this tag to tell the members' text from the base model's.
    """
    tags = _ROW_MEMBERS.get(module)
    if tags is None:
        return None
    if batch % len(tags):
        raise ValueError(f"a batch of {batch} rows does not extend the {len(tags)}-row member map")
    return [tag for tag in tags for _ in range(batch // len(tags))]


def lowrank_factors(seed: int, name: str, shape: tuple[int, int], rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) of parameter `name` (out x in) under `seed`: A is out x rank, B is in x rank, fp32."""
    out_features, in_features = shape
    a = noise(seed, f"{name}.lowrank_A", (out_features, rank))
    b = noise(seed, f"{name}.lowrank_B", (in_features, rank))
    return torch.from_numpy(a), torch.from_numpy(b)


def lowrank_direction(seed: int, name: str, shape: tuple[int, int], rank: int) -> torch.Tensor:
    """The dense unit direction E = A B^T / sqrt(rank) that member `seed` adds to `name` (times sigma)."""
    a, b = lowrank_factors(seed, name, shape, rank)
    return (a @ b.T) / math.sqrt(rank)


class _MemberFactors:
    """All members' factors for one layer, stacked; A carries each member's sign sigma / sqrt(r)."""

    def __init__(self, name: str, weight: torch.Tensor, perturbations: Sequence[Perturbation], rank: int):
        shape = (weight.shape[0], weight.shape[1])
        a_scaled, b_plain = [], []
        for p in perturbations:
            a, b = lowrank_factors(p.seed, name, shape, rank)
            a_scaled.append(a * (p.sign * p.sigma / math.sqrt(rank)))
            b_plain.append(b)
        self.b = torch.stack(b_plain)  # (N, in, r): right-multiplies x
        self.a_t = torch.stack(a_scaled).transpose(1, 2).contiguous()  # (N, r, out): right-multiplies x B

    def for_rows(self, members: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, A^T) gathered per batch row: (rows, in, r) and (rows, r, out)."""
        return self.b.index_select(0, members), self.a_t.index_select(0, members)


def _add_member_deltas(factors: _MemberFactors, rows: torch.Tensor) -> Callable:
    """Forward hook adding (x B_i) A_i^T to a linear layer's output, row by row.

    `generate` keeps row order; when it expands every row into k copies (num_return_sequences, beams)
    it repeats them in place, so a batch that is a whole multiple of the map inherits it row by row.
    The per-row factors are gathered once per batch size: decoding then costs two batched matmuls.
    """
    per_batch: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def hook(_module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        batch = output.shape[0]
        if batch not in per_batch:
            if batch % rows.numel():
                raise ValueError(f"a batch of {batch} rows does not extend the {rows.numel()}-row member map")
            per_batch[batch] = factors.for_rows(rows.repeat_interleave(batch // rows.numel()))
        b_rows, a_t_rows = per_batch[batch]
        x = args[0]
        low = torch.bmm(x.reshape(batch, -1, x.shape[-1]), b_rows)
        return torch.baddbmm(output.reshape(batch, -1, output.shape[-1]), low, a_t_rows).view(output.shape)

    return hook


class LowRankHost(PerturbedContext):
    """A `WeightsHost` whose members are low-rank perturbations of a module's nn.Linear weights.

    `population()` runs many members in one batch (the fast path); `perturb()`/`restore()` materialise
    one member densely, for code that evaluates members one at a time. Weights must be CPU float32 so
    updates and restores are exact in the weights' own memory. Within `scope` (as for
    `TorchWeightsHost`), linear weights evolve; linear biases stay fixed.
    """

    # Same hash as the full-rank host (it reads only self.module), so histories compare across hosts.
    weights_sha256 = TorchWeightsHost.weights_sha256

    def __init__(self, module: nn.Module, rank: int = 1, scope: str = "all_linear") -> None:
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        self.module = module
        self.rank = rank
        self.scope = scope
        self.noise_version = f"{NOISE_VERSION}+lowrank-r{rank}"
        self._targets = self._linear_weights(module, scope)
        self._saved: dict[str, torch.Tensor] | None = None

    @staticmethod
    def _linear_weights(module: nn.Module, scope: str) -> dict[str, nn.Linear]:
        """Canonical name -> layer for each nn.Linear weight in scope; anything else in scope is an error."""
        linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
        layer_of_weight = {m.weight.data_ptr(): m for m in linears}
        biases = {m.bias.data_ptr() for m in linears if m.bias is not None}
        targets = {}
        for name, param in select_parameters(module, scope):
            if param.data_ptr() in biases:
                continue
            if param.data_ptr() not in layer_of_weight:
                raise ValueError(f"low-rank ES evolves only nn.Linear weights; scope {scope!r} selects {name}")
            if param.dtype != torch.float32 or param.device.type != "cpu":
                raise ValueError(f"low-rank ES needs CPU float32 weights; {name} is {param.dtype} on {param.device}")
            targets[name] = layer_of_weight[param.data_ptr()]
        if not targets:
            raise ValueError(f"scope {scope!r} selects no nn.Linear weight")
        return targets

    @property
    def parameter_names(self) -> list[str]:
        """Canonical names of the evolved linear weights."""
        return list(self._targets)

    @contextmanager
    def population(
        self, perturbations: Sequence[Perturbation], member_of_row: Sequence[int] | torch.Tensor
    ) -> Iterator[None]:
        """Within this block, batch row k of every forward pass runs under perturbations[member_of_row[k]]."""
        rows = torch.as_tensor(member_of_row, dtype=torch.long)
        if rows.ndim != 1 or rows.numel() == 0:
            raise ValueError("member_of_row must be a non-empty 1-D sequence of member indices")
        if int(rows.min()) < 0 or int(rows.max()) >= len(perturbations):
            raise ValueError(f"member indices must lie in [0, {len(perturbations)})")
        if self._saved is not None:
            raise RuntimeError("population() while a single member is perturbed; call restore() first")
        handles = []
        for name, layer in self._targets.items():
            factors = _MemberFactors(name, layer.weight, perturbations, self.rank)
            handles.append(layer.register_forward_hook(_add_member_deltas(factors, rows)))
        _ROW_MEMBERS[self.module] = tuple(self.member_tag(perturbations[int(i)]) for i in rows)
        try:
            yield
        finally:
            del _ROW_MEMBERS[self.module]
            for handle in handles:
                handle.remove()

    def member_tag(self, perturbation: Perturbation) -> str:
        """What sets a member's weights apart from the base: noise scheme, rank, sign, seed and sigma."""
        sign = "+" if perturbation.sign > 0 else "-"
        return f"{self.noise_version}{sign}{perturbation.seed:x}@{perturbation.sigma!r}"

    @torch.no_grad()
    def perturb(self, perturbation: Perturbation) -> None:
        """Set every evolved weight to W + sign sigma A B^T / sqrt(r), keeping W for an exact restore."""
        if self._saved is not None:
            raise RuntimeError("already perturbed; call restore() first")
        self._saved = {name: layer.weight.detach().clone() for name, layer in self._targets.items()}
        scale = perturbation.sign * perturbation.sigma
        for name, layer in self._targets.items():
            direction = lowrank_direction(perturbation.seed, name, tuple(layer.weight.shape), self.rank)
            layer.weight.add_(direction, alpha=scale)

    @torch.no_grad()
    def restore(self) -> None:
        """Copy the saved weights back: bit-identical to before perturb()."""
        if self._saved is None:
            raise RuntimeError("restore() without an active perturbation")
        for name, layer in self._targets.items():
            layer.weight.copy_(self._saved[name])
        self._saved = None

    @torch.no_grad()
    def apply_update(self, update: Update) -> None:
        """W += alpha sum_j coeffs[j] A_j B_j^T / sqrt(r) for every evolved weight, in fp32.

        Only the reference rule (plain SGD, no decay): momentum or Adam would keep a dense gradient.
        """
        if self._saved is not None:
            raise RuntimeError("apply_update() while perturbed; call restore() first")
        if update.optimizer.needs_gradient_buffer or update.optimizer.weight_decay > 0.0:
            raise ValueError("low-rank updates support only the reference rule (sgd, no momentum, no decay)")
        coeffs = np.asarray(update.coeffs, dtype=np.float32) * np.float32(update.alpha / math.sqrt(self.rank))
        for name, layer in self._targets.items():
            shape = tuple(layer.weight.shape)
            factors = [lowrank_factors(seed, name, shape, self.rank) for seed in update.seeds]
            a_weighted = torch.cat([a * float(c) for (a, _), c in zip(factors, coeffs, strict=True)], dim=1)
            b_all = torch.cat([b for _, b in factors], dim=1)
            layer.weight.add_(a_weighted @ b_all.T)  # (out, N r) @ (N r, in): the rank-N r sum
