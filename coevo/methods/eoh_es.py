"""`eoh+es` (Agentic ESOpt, Zheng et al.): as eoh, but m1 and m2 write each child under its own ES
direction (population x k of them), and each of the two phases ends in an ES update with reward P - C_eff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.base import CROSSOVERS, improvement_reward
from coevo.methods.eoh import EoH
from coevo.operators.eoh_operators import ProposalRequest
from coevo.population import as_parent

if TYPE_CHECKING:
    from coevo.context import Context


class EoHES(EoH):
    name = "eoh+es"
    uses_weights = True

    def offspring(self, context: Context, operator: str) -> None:
        if operator in CROSSOVERS:
            return super().offspring(context, operator)
        population = context.population
        members = context.ask()
        parents = [population.select(context.rng, 1)[0] for _ in members]
        worst = population.worst_fitness
        children = context.propose([ProposalRequest(operator, (as_parent(p),)) for p in parents], members)
        rewards = [improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(parents, children, strict=False)]
        context.tell(members[: len(children)], rewards)
        population.add(children)
