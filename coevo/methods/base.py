"""What every method shares: the `Method` base the loop drives (`coevo.context.Policy`), its ES sizing,
and the rewards the joint methods tell ES.

A method is a policy over the context of its workload's family (`coevo.context`, `coevo.family`): it
never sees the run loop. It names the families it runs on and is built from its own validated
`[settings]`, the run's facts (`coevo.context.RunFacts`: seed, budget, population, ES pairing) and the
run's family, never from the whole config; a method that runs on both chooses its family's moves once, when it is built.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel

from coevo.es.shaping import penalize_invalid
from coevo.family import HEURISTICS, Family
from coevo.methods.prompt_report import PROMPT_CHANGES
from coevo.operators.eoh_operators import ProposalRequest
from coevo.operators.templates import PromptTemplates, default_templates
from coevo.population import PromptPool, PromptVariant
from coevo.run.report_section import ReportSection
from coevo.run.starting_heuristics import starting_heuristics

if TYPE_CHECKING:
    from coevo.candidate import Candidate
    from coevo.context import HeuristicContext, RunContext, RunFacts
    from coevo.workload import Member

CROSSOVERS = ("e1", "e2")
T = TypeVar("T")


def improvement_reward(parent: float, child: float | None, worst: float) -> float:
    """Reference eoh+es reward P - C_eff, on fitness (higher is better): C - P. A child that is invalid
    or worse than the population's worst counts as C_eff = max(W, P - 1), so failures are penalised by
    a bounded amount. Kept for the record (`es.reward = "improvement"`): a copy of its parent earns 0
    and an invalid child at most 1 less, so it mostly tells ES validity, not quality."""
    if child is None or child < worst:
        return max(worst, parent - 1.0) - parent
    return child - parent


def quality_rewards(children: Sequence[Candidate]) -> list[float | None]:
    """Each child's own fitness, so a copy is worth its parent's quality; an invalid child a fixed step
    below the generation's worst valid child (`penalize_invalid`); all None when none is valid."""
    filled = penalize_invalid([c.fitness for c in children])
    return [None] * len(children) if filled is None else [float(r) for r in filled]


def mirrored(values: Sequence[T], share: int) -> list[T]:
    """Each value `share` times in a row: what the members of a mirrored ES pair (share 2) have in
    common, so that their rewards differ by their weights alone."""
    return [value for value in values for _ in range(share)]


class Method:
    """A policy: the phases of a generation and what each does. Generation 0 is always `init`.

    Each method declares itself once, on its class: its config name, whether it evolves the weights
    (and so needs an ES engine and a weight-capable backend), its phases, and the model of its own
    config table (`settings`), if it has one.
    """

    name: ClassVar[str]
    families: ClassVar[tuple[Family, ...]] = (HEURISTICS,)
    """The workload families the method runs on; it receives the context of the run's."""
    uses_weights: ClassVar[bool] = False
    trains_by_gradient: ClassVar[bool] = False
    """The method moves the weights by gradient steps, which need float32 weights (`llm.dtype = "auto"`)."""
    phases: ClassVar[tuple[str, ...]] = ()
    settings_model: ClassVar[type[BaseModel] | None] = None
    """The model of the method's `[settings]` table; None: the method takes none."""
    extra: ClassVar[tuple[str, str] | None] = None
    """(module, pip extra) an optional dependency the method needs, checked before any model loads."""
    report_sections: ClassVar[tuple[ReportSection, ...]] = (PROMPT_CHANGES,)
    """What the method adds to report.html (`coevo.run.report_section`), after the lineage."""

    def __init__(self, settings: Any, facts: RunFacts, family: Family = HEURISTICS) -> None:
        """`settings`: the method's `[settings]` table, validated by its `settings_model` (None without one)."""
        if family not in self.families:
            raise ValueError(f"method {self.name} does not run on {family.members}")
        self.settings = settings
        self.facts = facts
        self.family = family

    def run_phase(self, context: Any, phase: str) -> None:
        if phase == "init":
            self.initialise(context)
        else:
            self.generation_phase(context, phase)

    def initialise(self, context: HeuristicContext) -> None:
        """The starting heuristics, then i1 samples up to the population size."""
        library = self.starting_heuristics(context)
        context.population.add(library)
        missing = self.facts.init_samples
        if missing is None:
            missing = self.facts.population_size - len(library)
        if missing > 0:
            context.population.add(context.propose([ProposalRequest("i1")] * missing))

    def generation_phase(self, context: Any, phase: str) -> None:
        raise NotImplementedError

    def starting_heuristics(self, context: HeuristicContext) -> list[Candidate]:
        """The heuristics the config's `library` names (none, the task's seed, or seed + evolved),
        scored and charged."""
        return context.add_library(starting_heuristics(context.task, self.facts.library))

    # ES sizing and rewards; methods without weights never ask.
    @property
    def pair_share(self) -> int:
        """Members that share one text, parent and sampling seed: 2 with mirrored pairs, else 1."""
        return 2 if self.facts.antithetic else 1

    def es_rewards(
        self, judged_against: Sequence[Candidate], children: Sequence[Candidate], worst: float
    ) -> list[float | None]:
        """What ES is told for each child: its quality (the default), or the reference's improvement on
        the parent it was judged against (`es.reward = "improvement"`, `worst` the population's worst)."""
        if self.facts.reward == "quality":
            return quality_rewards(children)
        return [improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(judged_against, children, strict=False)]

    def es_population(self) -> int:
        return self.facts.population_size * self.facts.directions_per_parent

    def planned_updates(self) -> int:
        return 1

    # The prompt side: one fixed variant unless the method evolves them.
    def prompt_pool(self) -> PromptPool:
        """The pool of prompt variants the run starts with (and its size)."""
        return PromptPool(1, [self.initial_prompt()])

    def initial_prompt(self) -> PromptVariant:
        templates = default_templates()
        return PromptVariant(prompt_id(templates, ""), templates)

    def heldout_view(self) -> tuple[Member, str] | None:
        """(the text held-out episodes are played with, how reports name it); None: no text."""
        return None

    # State a method carries across steps beyond the loop's (committed with each step).
    def state(self) -> dict[str, Any] | None:
        return None

    def restore(self, state: dict[str, Any] | None) -> None:
        """Continue from `state()` of the last committed step."""

    def updates(self, context: RunContext) -> str:
        """What the live weights have received so far, in this method's words (held-out lines)."""
        return f"{context.es_updates} ES updates"

    def refill(self, context: HeuristicContext) -> bool:
        """With no valid heuristic left, sample a fresh population from scratch; True if it did."""
        if context.population.members:
            return False
        context.population.add(context.propose([ProposalRequest("i1")] * self.facts.population_size))
        return True


class OneUpdatePerGeneration(Method):
    """ES sizing of the joint methods: a generation is one ES population and ends in one update. On
    family that writes code each member writes one child (`population_size` x k members); on episodes
    each member is one evaluation (`population_size` members)."""

    uses_weights = True

    def es_population(self) -> int:
        return super().es_population() if self.family.writes_code else self.facts.population_size

    def planned_updates(self) -> int:
        if self.family.writes_code:
            return planned_generations(self.facts, self.es_population())
        return math.ceil(self.facts.budget / self.facts.population_size)


def initial_evaluations(facts: RunFacts) -> int:
    """What generation 0 spends: the library (one seed; evolved extras are not counted) and i1 samples."""
    library = 0 if facts.library == "none" else 1
    samples = facts.population_size - library if facts.init_samples is None else facts.init_samples
    return library + max(samples, 0)


def planned_generations(facts: RunFacts, per_generation: int) -> int:
    """Generations the budget allows after generation 0, at least one."""
    return max(1, math.ceil((facts.budget - initial_evaluations(facts)) / per_generation))


def prompt_id(templates: PromptTemplates, notes: str) -> str:
    """Content hash of a prompt variant: equal prompts share an id across runs."""
    payload = json.dumps({"templates": templates.to_dict(), "notes": notes}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]
