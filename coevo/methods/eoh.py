"""`eoh` (Agentic ESOpt, Zheng et al.): EoH generations of e1, e2, m1, m2 over an elitist population."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.base import CROSSOVERS, Method, planned_generations
from coevo.operators.eoh_operators import ProposalRequest
from coevo.population import as_parent

if TYPE_CHECKING:
    from coevo.context import HeuristicContext

OPERATORS = ("e1", "e2", "m1", "m2")


class EoH(Method):
    name = "eoh"
    phases = OPERATORS

    def generation_phase(self, context: HeuristicContext, phase: str) -> None:
        if self.refill(context):
            return
        if phase in CROSSOVERS and not context.population.can_draw(2):
            return
        self.offspring(context, phase)

    def offspring(self, context: HeuristicContext, operator: str) -> None:
        size = 2 if operator in CROSSOVERS else 1
        population = context.population
        requests = [
            ProposalRequest(operator, tuple(as_parent(p) for p in population.select(context.rng, size)))
            for _ in range(self.facts.population_size)
        ]
        population.add(context.propose(requests))

    def planned_updates(self) -> int:
        return 2 * planned_generations(self.facts, 2 * self.facts.population_size + 2 * self.es_population())
