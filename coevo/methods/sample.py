"""`sample` (Agentic ESOpt, Zheng et al.): batches of i1 samples from the fixed model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.base import Method
from coevo.operators.eoh import ProposalRequest

if TYPE_CHECKING:
    from coevo.context import Context


class Sample(Method):
    name = "sample"
    phases = ("sample",)

    def initialise(self, context: Context) -> None:
        context.population.add(self.starting_heuristics(context))

    def generation_phase(self, context: Context, phase: str) -> None:
        context.population.add(context.propose([ProposalRequest("i1")] * self.config.sample_batch))
