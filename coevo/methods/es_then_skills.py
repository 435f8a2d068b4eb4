"""`es-then-skills`: ES generations of members shown the starting library, its content fixed; ES is
told each member's reward less its shown skills' additive effects. The failures of every generation
are kept (in the step state), and once the budget is spent they are distilled once into skill edits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.base import OneUpdatePerGeneration
from coevo.methods.skill_method import SkillMethod

if TYPE_CHECKING:
    from coevo.context import EpisodeContext, HeuristicContext


class ESThenSkills(OneUpdatePerGeneration, SkillMethod):
    name = "es-then-skills"
    phases = ("joint",)

    def generation_phase(self, context: HeuristicContext | EpisodeContext, phase: str) -> None:
        if not self.moves.refill(context):
            self.skills.trajectories += self.es_generation(context)
        if not context.budget_left:
            self.moves.learn(context, self.skills.trajectories)
