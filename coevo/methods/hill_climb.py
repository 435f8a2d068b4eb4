"""`hill-climb`: an LLM hill climber, as LLM4AD ships one.

Keep the best heuristic found so far; each step asks the LLM for `batch` modifications of it (one
operator, m1 by default) and keeps a child only if it is strictly better. Generation 0 scores the
starting heuristics (config key `library`: the task's seed by default), with i1 samples only where
they leave no valid heuristic. A baseline: no population of parents, no crossover, no weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from coevo.methods.base import Method
from coevo.operators.eoh_operators import ProposalRequest
from coevo.population import as_parent

if TYPE_CHECKING:
    from coevo.context import HeuristicContext


class HillClimbSettings(BaseModel):
    """The `[settings]` table of `hill-climb`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    operator: Literal["m1", "m2"] = Field(
        "m1", description="how a step modifies the best: its logic (m1) or its parameters (m2)"
    )
    batch: int = Field(1, ge=1, description="modifications of the best asked for per step")


class HillClimb(Method):
    name = "hill-climb"
    phases = ("climb",)
    settings_model = HillClimbSettings

    def initialise(self, context: HeuristicContext) -> None:
        context.population.add(self.starting_heuristics(context))
        self.restart(context)

    def generation_phase(self, context: HeuristicContext, phase: str) -> None:
        if self.restart(context):
            return
        best = as_parent(context.population.best)
        requests = [ProposalRequest(self.settings.operator, (best,))] * self.settings.batch
        context.population.add(context.propose(requests))  # the population keeps an incumbent over an equal

    def restart(self, context: HeuristicContext) -> bool:
        """Without a valid heuristic to climb from, ask for `batch` fresh ones; True if it did."""
        if context.population.best is not None:
            return False
        context.population.add(context.propose([ProposalRequest("i1")] * self.settings.batch))
        return True
