"""`es` on an agent's weights alone (Agentic ESOpt's agent setting): each member plays the generation's
episodes under its own perturbation, and its mean episode reward is its ES reward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.base import OneUpdatePerGeneration

if TYPE_CHECKING:
    from coevo.context import Context
    from coevo.workload import Capabilities


class ES(OneUpdatePerGeneration):
    name = "es"
    phases = ("es",)

    @classmethod
    def runs_on(cls, capabilities: Capabilities) -> bool:
        return capabilities.episodes

    def initialise(self, context: Context) -> None:
        """No members yet: measure the base weights on the held-out split, to compare with at the end."""
        context.record_heldout("before")

    def generation_phase(self, context: Context, phase: str) -> None:
        members = context.ask()
        evaluations = context.play(members)
        context.tell(members[: len(evaluations)], [e.reward for e in evaluations])
