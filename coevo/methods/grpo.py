"""`grpo`: the gradient baseline on the same episodes as `es`.

One TRL GRPO step per generation, groups of `population_size` rollouts per search episode, every turn
trained with its episode's group-normalised advantage (`coevo.rl.grpo_stepper`). A group's rollouts play as
many episodes as an `es` generation's members, so each step is charged `population_size` evaluations
and equal budgets mean equal episodes. Held-out success is measured before and after as for `es`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from coevo.methods.es import ES
from coevo.run.config import ConfigError

if TYPE_CHECKING:
    from coevo.context import EpisodeContext, RunContext, RunFacts
    from coevo.family import Family


class GRPO(ES):
    name = "grpo"
    phases = ("grpo",)
    extra = ("trl", "rl")
    trains_by_gradient = True

    def __init__(self, settings: None, facts: RunFacts, family: Family) -> None:
        super().__init__(settings, facts, family)
        self._stepper = None

    @property
    def steps(self) -> int:
        """GRPO steps taken so far (the stepper counts them; none before it exists)."""
        return self._stepper.steps if self._stepper else 0

    def updates(self, context: RunContext) -> str:
        return f"{self.steps} GRPO steps"

    def state(self) -> dict[str, Any]:
        return {"grpo_steps": self.steps}

    def restore(self, state: dict[str, Any] | None) -> None:
        """Refused once a step has moved the weights: the ES history cannot replay them, and TRL's
        optimizer state is not stored (before the first step there is nothing to lose)."""
        if state and state["grpo_steps"]:
            raise ConfigError(
                f"a grpo run cannot be resumed after its {state['grpo_steps']} GRPO step(s); start it again"
            )

    def generation_phase(self, context: EpisodeContext, phase: str) -> None:
        from coevo.rl.grpo_stepper import GRPOSettings, GRPOStepper

        batch = context.generation_workload()
        if self._stepper is None:
            self._stepper = GRPOStepper(
                context.llm,
                batch.env,
                batch.horizon,
                len(batch.seeds),
                context.run_dir / "grpo",
                GRPOSettings(num_generations=self.facts.population_size),
                seed=self.facts.seed,
            )
        turns_before = self._stepper.turns
        metrics = self._stepper.step(list(batch.seeds))
        with open(context.run_dir / "grpo_history.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps({"generation": context.generation, **metrics}) + "\n")
        context.charge(self.facts.population_size, self._stepper.turns - turns_before)
