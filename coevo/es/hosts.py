"""Which host runs over a torch module: full-rank members in place, or low-rank members decoded
together (`coevo.es.lowrank`, built on `coevo.es.host`); the one place that chooses between them."""

from __future__ import annotations

from torch import nn

from coevo.es.host import TorchWeightsHost
from coevo.es.lowrank import LowRankHost
from coevo.es.protocols import WeightsHost


def module_host(module: nn.Module, scope: str, rank: int = 0) -> WeightsHost:
    """The host over a torch module's weights: full-rank members in place (`rank` 0), or rank-`rank`
    members decoded together in one batch (`LowRankHost`)."""
    if rank:
        return LowRankHost(module, rank=rank, scope=scope)
    return TorchWeightsHost(module, scope=scope)
