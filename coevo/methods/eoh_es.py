"""`eoh+es` (Agentic ESOpt, Zheng et al.): as eoh, but m1 and m2 write each child under its own ES
direction (population x k of them), and each of the two phases ends in an ES update. Mirrored pairs share
parent, operator and sampling seed; ES is told each child's quality (`Method.es_rewards`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.base import CROSSOVERS, mirrored
from coevo.methods.eoh import EoH
from coevo.operators.eoh_operators import ProposalRequest
from coevo.population import as_parent

if TYPE_CHECKING:
    from coevo.context import HeuristicContext


class EoHES(EoH):
    name = "eoh+es"
    uses_weights = True

    def offspring(self, context: HeuristicContext, operator: str) -> None:
        if operator in CROSSOVERS:
            return super().offspring(context, operator)
        population = context.population
        members = context.ask()
        share = self.pair_share
        parents = mirrored([population.select(context.rng, 1)[0] for _ in members[::share]], share)
        worst = population.worst_fitness
        children = context.propose([ProposalRequest(operator, (as_parent(p),)) for p in parents], members)
        context.tell(members[: len(children)], self.es_rewards(parents, children, worst))
        population.add(children)
