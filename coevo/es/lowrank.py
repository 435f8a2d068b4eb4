"""EGGROLL-style batched population: N members decode in ONE batch, each under its own perturbation.

Member i perturbs every targeted linear weight W (out x in) by E_i = A_i B_i^T / sqrt(r), A_i (out x r)
and B_i (in x r) drawn from the same counter-based noise as full-rank ES (keys f"{name}.lowrank_A" and
f"{name}.lowrank_B"). E_i is never materialised during a rollout: a forward hook adds
(sign_i sigma_i / sqrt r) (x B_i) A_i^T to the layer's output for the batch rows of member i, which
costs O(r (in + out)) per token instead of a full weight pass per member. The update
sum_i c_i A_i B_i^T / sqrt(r) has rank N r, so it is applied to the weights as a dense fp32 tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from coevo.es.noise import NOISE_VERSION, noise
from coevo.es.perturbation import Perturbation, Update

LOWRANK_NOISE_VERSION = f"{NOISE_VERSION}+lowrank"


def lowrank_factors(seed: int, name: str, shape: tuple[int, int], rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) of parameter `name` (out x in) under `seed`: A is out x rank, B is in x rank, fp32."""
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    out_features, in_features = shape
    a = noise(seed, f"{name}.lowrank_A", (out_features, rank))
    b = noise(seed, f"{name}.lowrank_B", (in_features, rank))
    return torch.from_numpy(a), torch.from_numpy(b)


def lowrank_direction(seed: int, name: str, shape: tuple[int, int], rank: int) -> torch.Tensor:
    """The dense unit direction E = A B^T / sqrt(rank) that member `seed` adds to `name` (times sigma)."""
    a, b = lowrank_factors(seed, name, shape, rank)
    return (a @ b.T) / math.sqrt(rank)


def linear_targets(model: nn.Module, include: Callable[[str], bool] | None = None) -> dict[str, nn.Linear]:
    """Canonical weight name -> nn.Linear for every linear layer the population perturbs.

    Names come from `named_parameters()`, which lists a tied weight once under its first name, so a
    head tied to the input embedding is skipped (perturbing only its output use would not be the same
    model as perturbing the shared tensor). `include` narrows the set further by weight name.
    """
    params = dict(model.named_parameters())
    targets = {}
    for module_name, module in model.named_modules():
        weight_name = f"{module_name}.weight"
        if isinstance(module, nn.Linear) and params.get(weight_name) is module.weight:
            if include is None or include(weight_name):
                targets[weight_name] = module
    if not targets:
        raise ValueError("no nn.Linear weight of the model is selected for low-rank perturbation")
    return targets


class _MemberFactors:
    """Stacked factors of all members for one layer, scaled so that delta = (x B) A_scaled^T."""

    def __init__(self, name: str, weight: torch.Tensor, perturbations: Sequence[Perturbation], rank: int):
        shape = (weight.shape[0], weight.shape[1])
        a_stack, b_stack = [], []
        for p in perturbations:
            a, b = lowrank_factors(p.seed, name, shape, rank)
            a_stack.append(a * (p.sign * p.sigma / math.sqrt(rank)))
            b_stack.append(b)
        # bmm layouts: B (N, in, r) right-multiplies x; A^T (N, r, out) right-multiplies x B.
        self.b = torch.stack(b_stack).to(weight.dtype)
        self.a_t = torch.stack(a_stack).transpose(1, 2).contiguous().to(weight.dtype)

    def delta(self, x: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """Output correction for input x (batch, ..., in), row k belonging to member members[k]."""
        flat = x.reshape(x.shape[0], -1, x.shape[-1])
        low = torch.bmm(flat, self.b.index_select(0, members))
        return torch.bmm(low, self.a_t.index_select(0, members)).reshape(*x.shape[:-1], -1)


class LowRankPopulation:
    """The perturbations of one ES generation, ready to run as rows of a single batch."""

    def __init__(
        self,
        model: nn.Module,
        perturbations: Sequence[Perturbation],
        rank: int = 1,
        include: Callable[[str], bool] | None = None,
    ):
        if not perturbations:
            raise ValueError("a population needs at least one perturbation")
        self.perturbations = tuple(perturbations)
        self.rank = rank
        self._targets = linear_targets(model, include)
        self._factors = {
            name: _MemberFactors(name, module.weight, self.perturbations, rank)
            for name, module in self._targets.items()
        }

    @contextmanager
    def members(self, member_of_row: Sequence[int] | torch.Tensor) -> Iterator[None]:
        """Within this block, batch row k of every forward pass runs under member member_of_row[k].

        `generate` keeps row order; when it expands each row into several (num_return_sequences),
        it repeats rows in place, so a batch that is a whole multiple of the mapping inherits it.
        """
        rows = torch.as_tensor(member_of_row, dtype=torch.long)
        if rows.ndim != 1 or rows.numel() == 0:
            raise ValueError("member_of_row must be a non-empty 1-D sequence of member indices")
        if int(rows.min()) < 0 or int(rows.max()) >= len(self.perturbations):
            raise ValueError(f"member indices must lie in [0, {len(self.perturbations)})")
        handles = [
            module.register_forward_hook(self._hook(self._factors[name], rows))
            for name, module in self._targets.items()
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @staticmethod
    def _hook(factors: _MemberFactors, rows: torch.Tensor) -> Callable:
        def add_member_delta(_module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
            batch = output.shape[0]
            if batch % rows.numel():
                raise ValueError(f"batch of {batch} rows does not extend the {rows.numel()}-row member map")
            members = rows if batch == rows.numel() else rows.repeat_interleave(batch // rows.numel())
            return output + factors.delta(args[0], members)

        return add_member_delta


@torch.no_grad()
def apply_lowrank_update_(
    model: nn.Module, update: Update, rank: int, include: Callable[[str], bool] | None = None
) -> None:
    """W += alpha * sum_j coeffs[j] A_j B_j^T / sqrt(rank) on every target, summed in fp32.

    Only the reference rule (plain SGD, no decay) is defined here: momentum and Adam would need the
    dense gradient of every member set kept as optimizer state.
    """
    if update.optimizer.needs_gradient_buffer or update.optimizer.weight_decay > 0.0:
        raise ValueError("low-rank updates support only the reference rule (sgd, no momentum, no decay)")
    coeffs = torch.from_numpy(np.asarray(update.coeffs, dtype=np.float32)) * (update.alpha / math.sqrt(rank))
    for name, module in linear_targets(model, include).items():
        weight = module.weight
        a_cols, b_cols = [], []
        for seed, coeff in zip(update.seeds, coeffs):
            a, b = lowrank_factors(seed, name, (weight.shape[0], weight.shape[1]), rank)
            a_cols.append(a * coeff)
            b_cols.append(b)
        step = torch.cat(a_cols, dim=1) @ torch.cat(b_cols, dim=1).T  # (out, N r) @ (N r, in)
        weight.add_(step)  # computed in fp32, rounded once into the weight's dtype
