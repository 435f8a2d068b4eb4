"""`sample+es` (Agentic ESOpt, Zheng et al.): each i1 sample of a batch from its own perturbed model;
reward = fitness, one ES update per batch (invalid members penalised by the engine; all invalid: no
update)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from coevo.methods.sample import Sample
from coevo.operators.eoh_operators import ProposalRequest

if TYPE_CHECKING:
    from coevo.context import HeuristicContext


class SampleES(Sample):
    name = "sample+es"
    uses_weights = True

    def es_population(self) -> int:
        return self.settings.batch

    def planned_updates(self) -> int:
        return math.ceil(self.facts.budget / self.settings.batch)

    def generation_phase(self, context: HeuristicContext, phase: str) -> None:
        members = context.ask()
        children = context.propose([ProposalRequest("i1")] * len(members), members)
        context.tell(members[: len(children)], [c.fitness for c in children])
        context.population.add(children)
