"""What every method shares: the `Method` base the loop drives (`coevo.context.Policy`), its ES sizing,
and the rewards the joint methods tell ES.

A method is a policy over a `coevo.context.Context`: it never sees the run loop. It is built from the
run's config and the workload's capabilities (`coevo.workload.Capabilities`), and asks the latter, not
the workload's kind, where its moves differ between heuristics and episodes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel

from coevo.es.shaping import penalize_invalid
from coevo.methods.prompt_report import PROMPT_CHANGES
from coevo.operators.eoh_operators import ProposalRequest
from coevo.operators.templates import PromptTemplates, default_templates
from coevo.population import PromptPool, PromptVariant
from coevo.run.report_section import ReportSection
from coevo.run.starting_heuristics import starting_heuristics
from coevo.workload import Capabilities

if TYPE_CHECKING:
    from coevo.candidate import Candidate
    from coevo.context import Context
    from coevo.run.config import RunConfig
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
    uses_weights: ClassVar[bool] = False
    phases: ClassVar[tuple[str, ...]] = ()
    settings_model: ClassVar[type[BaseModel] | None] = None
    """The model of the method's `[settings]` table; None: the method takes none."""
    extra: ClassVar[tuple[str, str] | None] = None
    """(module, pip extra) an optional dependency the method needs, checked before any model loads."""
    report_sections: ClassVar[tuple[ReportSection, ...]] = (PROMPT_CHANGES,)
    """What the method adds to report.html (`coevo.run.report_section`), after the lineage."""

    def __init__(self, config: RunConfig, capabilities: Capabilities) -> None:
        self.config = config
        self.capabilities = capabilities
        self.settings = None if self.settings_model is None else self.settings_model.model_validate(config.settings)

    @classmethod
    def runs_on(cls, capabilities: Capabilities) -> bool:
        """Whether this method can run on a workload with `capabilities` (by default: heuristics)."""
        return capabilities.heuristics

    def run_phase(self, context: Context, phase: str) -> None:
        if phase == "init":
            self.initialise(context)
        else:
            self.generation_phase(context, phase)

    def initialise(self, context: Context) -> None:
        """The starting heuristics, then i1 samples up to the population size."""
        library = self.starting_heuristics(context)
        context.population.add(library)
        missing = self.config.init_samples
        if missing is None:
            missing = self.config.population_size - len(library)
        if missing > 0:
            context.population.add(context.propose([ProposalRequest("i1")] * missing))

    def generation_phase(self, context: Context, phase: str) -> None:
        raise NotImplementedError

    def starting_heuristics(self, context: Context) -> list[Candidate]:
        """The heuristics the config's `library` names (none, the task's seed, or seed + evolved),
        scored and charged."""
        return context.add_library(starting_heuristics(context.task, self.config.library))

    # ES sizing and rewards; methods without weights never ask.
    @property
    def pair_share(self) -> int:
        """Members that share one text, parent and sampling seed: 2 with mirrored pairs, else 1."""
        return 2 if self.config.es.antithetic else 1

    def es_rewards(
        self, judged_against: Sequence[Candidate], children: Sequence[Candidate], worst: float
    ) -> list[float | None]:
        """What ES is told for each child: its quality (the default), or the reference's improvement on
        the parent it was judged against (`es.reward = "improvement"`, `worst` the population's worst)."""
        if self.config.es.reward == "quality":
            return quality_rewards(children)
        return [improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(judged_against, children, strict=False)]

    def es_population(self) -> int:
        return self.config.population_size * self.config.es.directions_per_parent

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

    def updates(self, context: Context) -> str:
        """What the live weights have received so far, in this method's words (held-out lines)."""
        return f"{context.es_updates} ES updates"

    def refill(self, context: Context) -> bool:
        """With no valid heuristic left, sample a fresh population from scratch; True if it did.
        Members that are not heuristics keep no population, so there is nothing to refill."""
        if not self.capabilities.heuristics or context.population.members:
            return False
        context.population.add(context.propose([ProposalRequest("i1")] * self.config.population_size))
        return True


class OneUpdatePerGeneration(Method):
    """ES sizing of the joint methods: a generation is one ES population and ends in one update. On
    heuristics each member writes one child (`population_size` x k members); on episodes each member
    is one evaluation (`population_size` members)."""

    uses_weights = True

    def es_population(self) -> int:
        return self.config.population_size if self.capabilities.episodes else super().es_population()

    def planned_updates(self) -> int:
        if self.capabilities.episodes:
            return math.ceil(self.config.budget / self.config.population_size)
        return planned_generations(self.config, self.es_population())


def initial_evaluations(config: RunConfig) -> int:
    """What generation 0 spends: the library (one seed; evolved extras are not counted) and i1 samples."""
    library = 0 if config.library == "none" else 1
    samples = config.population_size - library if config.init_samples is None else config.init_samples
    return library + max(samples, 0)


def planned_generations(config: RunConfig, per_generation: int) -> int:
    """Generations the budget allows after generation 0, at least one."""
    return max(1, math.ceil((config.budget - initial_evaluations(config)) / per_generation))


def prompt_id(templates: PromptTemplates, notes: str) -> str:
    """Content hash of a prompt variant: equal prompts share an id across runs."""
    payload = json.dumps({"templates": templates.to_dict(), "notes": notes}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]
