"""`coevo`, this project's method: prompts or skills and weights evolve on the same clock.

Every member of a generation is an ES direction carrying some text, and the same evaluations drive
the ES update and the text's evolution. Credit is split so a good text cannot masquerade as a good
direction: ES is told each member's reward less its text's estimated effect.

* Without a skill library on heuristics, the text is a prompt variant: each mirrored pair of ES
  members (+eps, -eps) writes two children from the same variant, parents, operator and sampling seed,
  so the pair's reward difference is its direction's alone (the engine centres each pair) and every
  member informs ES; a variant is scored by the running mean of its children's rewards across
  generations, and the best variant (shrunk towards the pool's mean) is rewritten by the LLM from the
  evaluator's feedback once per generation.
* With a skill library (`settings.library`; always on episodes), the text is the library, each member
  shown its own half, and the generation's failures are learned into skill edits
  (`coevo.methods.skill_method`), the split generalised to N skills (`coevo.credit_split`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from coevo.family import HEURISTICS
from coevo.methods.base import CROSSOVERS, Method, OneUpdatePerGeneration, mirrored, prompt_id
from coevo.methods.skill_method import SkillMethod
from coevo.operators.constants import tunable_values
from coevo.operators.eoh_operators import ProposalRequest
from coevo.operators.records import Parent, TextProposal, direction
from coevo.operators.reflection import ComponentRewriter, Reflector
from coevo.operators.templates import OPERATORS
from coevo.population import PromptPool, PromptVariant, as_parent
from coevo.run.config import ConfigError
from coevo.skills.settings import SkillsSettings

if TYPE_CHECKING:
    from coevo.candidate import Candidate
    from coevo.context import EpisodeContext, HeuristicContext, RunFacts
    from coevo.family import Family

HINT_TOKENS = 96
REWRITE_TOKENS = 384
"""Answer lengths of the prompt-side calls, whatever `llm.max_new_tokens` allows heuristics."""


class CoevoSettings(SkillsSettings):
    """The `[settings]` table of `coevo`: the prompt side's keys, then the skill methods' (used with a
    skill library)."""

    prompt_pool: int = Field(
        2, ge=1, description="prompt variants evolved alongside the weights (ES population: a multiple of 2 x this)"
    )
    operators: tuple[str, ...] = Field(("m2", "m1", "e2", "e1"), description="operators members cycle through")
    components: tuple[str, ...] = Field(("m2", "m1", "notes"), description="prompt parts the rewriter evolves")

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [op for op in value if op not in OPERATORS]
        if unknown or not value:
            raise ValueError(f"operators must be among {', '.join(OPERATORS)}, got {list(value)}")
        return value


class Coevo(OneUpdatePerGeneration, SkillMethod):
    name = "coevo"
    phases = ("joint",)
    settings_model = CoevoSettings

    def __init__(self, settings: CoevoSettings, facts: RunFacts, family: Family = HEURISTICS) -> None:
        super().__init__(settings, facts, family)
        self.evolves_skills = self.settings.library is not None or not family.writes_code
        """Whether the members' text is the skill library (else: prompt variants, which shape proposal
        requests and so need a family whose members are code the LLM writes)."""
        slots = self.pair_share * self.settings.prompt_pool
        if not self.evolves_skills and self.es_population() % slots:
            raise ConfigError(
                f"coevo: the ES population ({self.es_population()}) must be a multiple of {slots} "
                f"({self.pair_share} members a pair x settings.prompt_pool {self.settings.prompt_pool})"
            )

    def prompt_pool(self) -> PromptPool:
        return PromptPool(self.settings.prompt_pool, [self.initial_prompt()])

    def initialise(self, context: HeuristicContext | EpisodeContext) -> None:
        if self.evolves_skills:
            super().initialise(context)
        else:
            Method.initialise(self, context)

    def state(self) -> dict[str, Any] | None:
        return super().state() if self.evolves_skills else None

    def restore(self, state: dict[str, Any] | None) -> None:
        if self.evolves_skills:
            super().restore(state)

    def generation_phase(self, context: HeuristicContext | EpisodeContext, phase: str) -> None:
        if self.moves.refill(context):
            return
        if not self.evolves_skills:
            self.prompts_generation(context)
            return
        failed = self.es_generation(context)
        if self.moves.learns_now(context):
            self.moves.learn(context, failed)

    def prompts_generation(self, context: HeuristicContext) -> None:
        """One generation of (prompt variant, ES direction) members, then one rewrite of the best variant."""
        population = context.population
        members = context.ask()
        share = self.pair_share
        variants = context.prompts.assign(context.rng, len(members) // share)
        operators = self.settings.operators
        requests, judged_against = [], []
        for index, variant in enumerate(variants):
            operator = operators[index % len(operators)]
            if operator in CROSSOVERS and not population.can_draw(2):
                operator = "m1"
            parents = [] if operator == "i1" else population.select(context.rng, 2 if operator in CROSSOVERS else 1)
            if operator == "tune" and not tunable_values(parents[0].code):
                operator = "m2"  # nothing to retune: change the parameters the EoH way
            requests.append(
                ProposalRequest(operator, tuple(as_parent(p) for p in parents), variant.notes, variant.templates)
            )
            judged_against.append(max(parents, key=lambda p: p.fitness, default=population.members[-1]))
        requests, judged_against, variants = (mirrored(v, share) for v in (requests, judged_against, variants))
        worst = population.worst_fitness
        children = context.propose(requests, members, [v.id for v in variants])
        variants = variants[: len(children)]
        rewards = self.es_rewards(judged_against, children, worst)
        context.tell(members[: len(children)], rewards)
        by_variant: dict[str, list[float]] = defaultdict(list)
        for variant, reward in zip(variants, rewards, strict=True):
            if reward is not None:
                by_variant[variant.id].append(reward)
        context.prompts.record(by_variant)
        population.add(children)
        if context.budget_left:
            self.mutate_prompt(context, children, variants, judged_against)

    def mutate_prompt(
        self,
        context: HeuristicContext,
        children: Sequence[Candidate],
        variants: Sequence[PromptVariant],
        judged_against: Sequence[Candidate],
    ) -> None:
        """Rewrite one component of the best variant from how its children fared against the parent
        each was judged against (its best parent, or the population's worst for i1); admit the result."""
        best = context.prompts.best
        components = self.settings.components
        component = components[(context.generation - 1) % len(components)]
        mine = [(c, p) for c, v, p in zip(children, variants, judged_against, strict=False) if v.id == best.id]
        sampling = context.sampling_for_call()
        if component == "notes":
            pair = _reflection_pair(context, [c for c, _ in mine] or list(children))
            if pair is None:
                return
            reflector = Reflector(
                context.llm, context.task, context.ledger, best.templates, replace(sampling, max_new_tokens=HINT_TOKENS)
            )
            items = reflector.short([pair])
            if best.notes and isinstance(items[0], TextProposal):  # fold the hint into the notes it extends
                items.append(reflector.long(best.notes, [items[0].text]))
            context.record_text(items, best.id)
            if not isinstance(items[-1], TextProposal):
                return
            templates, notes = best.templates, items[-1].text
        else:
            shown = mine or zip(children, judged_against)
            feedback = [feedback_line(child, parent, context.task.sense) for child, parent in shown][:6]
            rewriter = ComponentRewriter(context.llm, context.ledger, replace(sampling, max_new_tokens=REWRITE_TOKENS))
            items = rewriter.rewrite(best.templates, component, feedback)
            context.record_text(items, best.id)
            if not isinstance(items[0], TextProposal):
                return
            templates, notes = best.templates.with_component(component, items[0].text), best.notes
        variant = PromptVariant(prompt_id(templates, notes), templates, notes, parent=best.id, changed=component)
        if all(v.id != variant.id for v in context.prompts.variants) and context.prompts.admit(variant) is not variant:
            context.register_prompt(variant)


def feedback_line(child: Candidate, parent: Candidate, sense: Literal["min", "max"]) -> str:
    """One line of evaluator feedback for the rewriter, in the task's natural sign and direction."""
    if not child.valid:
        return f"{child.operator} child was invalid: {child.reason}"
    verdict = "better than" if child.fitness > parent.fitness else "not better than"
    return (
        f"{child.operator} child scored {child.objective:.4g}, {verdict} its parent"
        f" ({parent.objective:.4g}; {direction(sense)})"
    )


def _reflection_pair(context: HeuristicContext, children: Sequence[Candidate]) -> tuple[Parent, Parent] | None:
    """(the population's best, the worst valid child below it) to reflect on, or None if no such pair."""
    best = context.population.best
    worse = [c for c in children if c.valid and best is not None and c.fitness < best.fitness]
    if not worse:
        return None
    return as_parent(best), as_parent(min(worse, key=lambda c: c.fitness))
