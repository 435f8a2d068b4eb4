"""`skills`: the weights stay fixed; every generation's members are shown the skill library
(`coevo.methods.skill_method`) and its failures are learned into edits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.skill_method import SkillMethod

if TYPE_CHECKING:
    from coevo.context import EpisodeContext, HeuristicContext


class Skills(SkillMethod):
    name = "skills"
    phases = ("skills",)

    def generation_phase(self, context: HeuristicContext | EpisodeContext, phase: str) -> None:
        if self.moves.refill(context):
            return
        failed, _ = self.moves.shown_generation(context, None)
        if self.moves.learns_now(context):
            self.moves.learn(context, failed)
