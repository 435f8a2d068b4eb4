"""`skills`: the weights stay fixed; every generation's members are shown the skill library
(`coevo.methods.skill_method`) and its failures are learned into edits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.methods.skill_method import SkillMethod

if TYPE_CHECKING:
    from coevo.context import Context


class Skills(SkillMethod):
    name = "skills"
    phases = ("skills",)

    def generation_phase(self, context: Context, phase: str) -> None:
        if self.refill(context):
            return
        failed, _ = self.shown_generation(context, None)
        if self.learns_now(context):
            self.learn(context, failed)
