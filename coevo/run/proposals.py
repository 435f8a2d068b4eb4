"""An ES member's heuristic as one unit of work, so the driver or a remote worker can write it.

The driver decides everything small about a member (its request with the parents' text, its
perturbation, its member-bound sampling seed); whoever holds the weights at the member's ES step then
writes the code under that perturbation. Since the seed is bound to the member's index, the answer does
not depend on where, or with which other members, it was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coevo.candidate import WeightsRef
from coevo.es.perturbation import Perturbation
from coevo.es.protocols import WeightsHost
from coevo.llm.base import SamplingParams
from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
from coevo.operators.records import Proposal, Rejection
from coevo.workload import Evaluation


@dataclass(frozen=True)
class ProposalJob:
    """What the driver sends for one member: a few kilobytes of text and numbers, never weights."""

    request: ProposalRequest
    perturbation: Perturbation
    weights: WeightsRef
    """The weights the member writes under (its ES step names the history it needs)."""
    sampling: SamplingParams
    """The call's sampling with `first_request` at the member's index."""


@dataclass(frozen=True)
class ProposedMember:
    """What comes back: the answer the driver stores, its verdict (None for a rejection) and its usage."""

    item: Proposal | Rejection
    evaluation: Evaluation | None
    usage: dict[str, Any]
    """`BudgetLedger.to_dict()` of the member's LLM call, for the driver's ledger."""


def propose_member(operators: EoHOperators, host: WeightsHost, job: ProposalJob) -> Proposal | Rejection:
    """Member `job` alone: under its perturbation (a full-rank host), or as the one batch row of a
    low-rank host's population."""
    population = getattr(host, "population", None)
    if population is None:
        with host.perturbed(job.perturbation):
            return operators.propose_many([job.request], job.sampling)[0]
    with population([job.perturbation], [0]):
        return operators.propose_many([job.request], job.sampling)[0]
