"""What the three skill-library methods (`skills`, `es-then-skills`, `coevo` with a library) share:
a skill library carried across steps and pinned on resume, and one generation of members shown
their own halves of it, on heuristics or on episodes.

On episodes (Trace2Skill, SkillOpt, ASI, AWM, Voyager) the members play the generation's episodes with the library
as their text (`coevo.skills.loop`). On heuristics each member is an EoH child (e1 e2 m1 m2 in turn)
whose request shows its own half of the library (`shown_to`) as hints, text procedures and helper
functions alike; a child that calls a helper it was shown gets its source in its code
(`ProposalRequest.helpers`), so the usual validation runs on what is stored. Each skill is credited
with its effect on the members' reward against its absence; the failed members are analysed into
edits. On heuristics, code skills (at the start and when proposed) are kept only if their tests pass
in the task's sandbox, and an edit must recur (`min_sources`) and strictly raise the val fitness of
one m1 child of the population's best written with the library (`ValScore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from coevo.family import EPISODES, HEURISTICS
from coevo.methods.base import CROSSOVERS, Method, improvement_reward, mirrored
from coevo.methods.eoh import OPERATORS
from coevo.methods.skill_report import SKILL_LIBRARY
from coevo.population import as_parent
from coevo.run.config import ConfigError
from coevo.skills.code_skills import SandboxTests, ValScore, failed_children, skills_request
from coevo.skills.gates import AcceptanceGate, CodeTestGate, RecurrenceGate
from coevo.skills.loop import SkillLoop, failed_trajectories
from coevo.skills.pinning import LibraryChanged
from coevo.skills.render import by_credit
from coevo.skills.settings import SkillsSettings
from coevo.skills.skill_credit import shown_to

if TYPE_CHECKING:
    from coevo.candidate import Candidate
    from coevo.context import EpisodeContext, HeuristicContext, RunFacts
    from coevo.es.perturbation import Perturbation
    from coevo.family import Family
    from coevo.workload import Member, Trajectory

Failed = list[tuple[str, "Trajectory"]]


class SkillMethod(Method):
    """A method whose skill library (`coevo.skills.loop.SkillLoop`) is carried across steps, on either
    family: what differs between them is chosen once, when the method is built (`EpisodeMoves`,
    `HeuristicMoves` below)."""

    settings_model = SkillsSettings
    families = (HEURISTICS, EPISODES)
    report_sections = (*Method.report_sections, SKILL_LIBRARY)

    def __init__(self, settings: SkillsSettings, facts: RunFacts, family: Family = HEURISTICS) -> None:
        super().__init__(settings, facts, family)
        self.skills = SkillLoop(settings, facts.seed)
        self.moves: HeuristicMoves | EpisodeMoves = MOVES[family.name](self)

    def state(self) -> dict[str, Any] | None:
        return self.skills.state()

    def restore(self, state: dict[str, Any] | None) -> None:
        try:
            self.skills.restore(state, self.settings.library)
        except LibraryChanged as exc:
            raise ConfigError(str(exc)) from None

    def initialise(self, context: Any) -> None:
        self.moves.start(context)

    def heldout_view(self) -> tuple[Member, str] | None:
        return self.skills.heldout_view()

    def es_generation(self, context: Any) -> Failed:
        """A shown generation under the ES engine's members, ending in their update; returns the failed."""
        members = context.ask()
        failed, residuals = self.moves.shown_generation(context, members)
        context.tell(members[: len(residuals)], residuals)
        return failed


class EpisodeMoves:
    """A skill method on episodes: members play the generation's episodes with the library as their text."""

    def __init__(self, method: SkillMethod) -> None:
        self.method = method

    def start(self, context: EpisodeContext) -> None:
        """Pin the starting library and measure it with the base weights on the held-out split."""
        self.method.skills.start(context)
        context.record_heldout("before")

    def refill(self, context: EpisodeContext) -> bool:
        """Episodes keep no population, so there is nothing to refill."""
        return False

    def shown_generation(
        self, context: EpisodeContext, members: Sequence[Perturbation | None] | None
    ) -> tuple[Failed, list[float | None]]:
        """One generation of members shown the library (under ES members if given; otherwise
        `population_size` of them under the live weights): the failed members and the rewards ES is
        told, each member's reward less its shown skills' additive effects."""
        method = self.method
        evaluations, residuals = method.skills.play(context, members or [None] * method.facts.population_size)
        return failed_trajectories(context.generation, evaluations), residuals

    def learns_now(self, context: EpisodeContext) -> bool:
        """Always: the held-out measurement at the end plays the final library."""
        return True

    def learn(self, context: EpisodeContext, failed: Sequence[tuple[str, Trajectory]]) -> None:
        """Edits from the `failed` members through recurrence and the held-out batch."""
        self.method.skills.learn(context, failed)


class HeuristicMoves:
    """A skill method on heuristics: each member is an EoH child whose request shows its own half of the
    library as hints."""

    def __init__(self, method: SkillMethod) -> None:
        self.method = method

    def start(self, context: HeuristicContext) -> None:
        """Pin the starting library, keep the code skills whose tests pass, and start the population."""
        self.method.skills.start(context, [self.tests_gate(context)])
        Method.initialise(self.method, context)

    def refill(self, context: HeuristicContext) -> bool:
        return self.method.refill(context)

    def shown_generation(
        self, context: HeuristicContext, members: Sequence[Perturbation] | None
    ) -> tuple[Failed, list[float | None]]:
        """One generation of children shown the library, added to the population: the failed children
        and what ES is told for each."""
        children, improvements, told = self.offspring_shown(context, members)
        context.population.add(children)
        return failed_children(context.generation, children, improvements), list(told)

    def learns_now(self, context: HeuristicContext) -> bool:
        """Only while budget is left for a generation to use the edits."""
        return context.budget_left > 0

    def learn(self, context: HeuristicContext, failed: Sequence[tuple[str, Trajectory]]) -> None:
        """Edits from the `failed` children through recurrence, the code skills' sandbox tests and the
        val score of an m1 child of the population's best (none without a valid heuristic to write it from)."""
        best = context.population.best
        if best is None:
            return
        settings = self.method.settings
        with context.evaluator_for("val") as val:
            heldout = ValScore(context, settings, as_parent(best), val, context.sampling_for_call())
            gates = (RecurrenceGate(settings.min_sources), self.tests_gate(context), AcceptanceGate(heldout))
            self.method.skills.learn(context, failed, gates)

    def tests_gate(self, context: HeuristicContext) -> CodeTestGate:
        return CodeTestGate(SandboxTests(context.evaluator, context.task.seed_code()))

    def offspring_shown(
        self, context: HeuristicContext, members: Sequence[Perturbation] | None
    ) -> tuple[list[Candidate], list[float], list[float | None]]:
        """One child per request (`population_size` of them, or one per ES member written under it),
        the two members of a mirrored pair shown the same subset of the library, with the same operator
        and parents; returns the children, their improvements on their parents (what the failure
        analysis reads) and what ES is told: their rewards (`Method.es_rewards`) with mirrored pairs
        (the pair shares its skills, so the engine's pair centring removes their effect exactly), else
        the rewards less the shown skills' additive effects. The shown skills' uses and credit move with
        the rewards."""
        method, population = self.method, context.population
        settings, facts = method.settings, method.facts
        ranked = by_credit(method.skills.library)
        share = 1 if members is None else method.pair_share
        count = (facts.population_size if members is None else len(members)) // share
        subsets = shown_to([s.name for s in ranked], count, facts.seed, context.generation, settings.show_share)
        requests, judged_against, shown = [], [], []
        for index, subset in enumerate(subsets):
            operator = OPERATORS[index % len(OPERATORS)]
            if operator in CROSSOVERS and not population.can_draw(2):
                operator = "m1"
            parents = population.select(context.rng, 2 if operator in CROSSOVERS else 1)
            mine = [s for s in ranked if s.name in subset]
            request, rendered = skills_request(operator, [as_parent(p) for p in parents], mine, settings.prompt_tokens)
            requests.append(request)
            judged_against.append(max(parents, key=lambda p: p.fitness))
            shown.append(rendered)
        requests, judged_against, shown = (mirrored(v, share) for v in (requests, judged_against, shown))
        worst = population.worst_fitness
        children = context.propose(requests, members)
        rewards = method.es_rewards(judged_against, children, worst)
        credit = [0.0 if r is None else r for r in rewards]  # none valid: no skill has a contrast
        residuals = method.skills.record(context.generation, shown[: len(children)], credit)
        improvements = [
            improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(judged_against, children, strict=False)
        ]
        return children, improvements, rewards if share == 2 else residuals


MOVES: dict[str, type[HeuristicMoves] | type[EpisodeMoves]] = {
    HEURISTICS.name: HeuristicMoves,
    EPISODES.name: EpisodeMoves,
}
"""A skill method's moves on each family it runs on."""
