"""`sample` (Agentic ESOpt, Zheng et al.): batches of i1 samples from the fixed model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from coevo.methods.base import Method
from coevo.operators.eoh_operators import ProposalRequest

if TYPE_CHECKING:
    from coevo.context import HeuristicContext


class SampleSettings(BaseModel):
    """The `[settings]` table of `sample` and `sample+es`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int = Field(20, ge=1, description="i1 samples per step (sample+es: the ES population)")


class Sample(Method):
    name = "sample"
    phases = ("sample",)
    settings_model = SampleSettings

    def initialise(self, context: HeuristicContext) -> None:
        context.population.add(self.starting_heuristics(context))

    def generation_phase(self, context: HeuristicContext, phase: str) -> None:
        context.population.add(context.propose([ProposalRequest("i1")] * self.settings.batch))
