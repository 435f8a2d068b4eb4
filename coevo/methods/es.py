"""`es` on an agent's weights alone (Agentic ESOpt's agent setting): each member plays the generation's
episodes under its own perturbation, and its mean episode reward is its ES reward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.family import EPISODES
from coevo.methods.base import OneUpdatePerGeneration

if TYPE_CHECKING:
    from coevo.context import EpisodeContext


class ES(OneUpdatePerGeneration):
    name = "es"
    phases = ("es",)
    families = (EPISODES,)

    def initialise(self, context: EpisodeContext) -> None:
        """No members yet: measure the base weights on the held-out split, to compare with at the end."""
        context.record_heldout("before")

    def generation_phase(self, context: EpisodeContext, phase: str) -> None:
        members = context.ask()
        evaluations = context.play(members)
        context.tell(members[: len(evaluations)], [e.reward for e in evaluations])
