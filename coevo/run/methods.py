"""The five methods, each a small policy over the runner's services (propose, tell, population).

Reference methods (REFERENCES.md section 1):
* `sample`: batches of i1 samples from the fixed model.
* `sample+es`: each i1 sample of a batch from its own perturbed model; reward = fitness, one ES
  update per batch (invalid members penalised by the engine; all invalid: no update).
* `eoh`: EoH generations of e1, e2, m1, m2 over an elitist population.
* `eoh+es`: as eoh, but m1 and m2 write each child under its own ES direction (population x k of them)
  and each of the two phases ends in an ES update with reward P - C_eff.

`coevo` (this project's method): every member of a generation is a (prompt variant, ES direction) pair
writing one child; the same evaluations drive the ES update, the prompt pool's scores and the heuristic
population, and the best prompt variant is rewritten by the LLM from the evaluator's feedback once per
generation, so prompts and weights move on the same clock. Credit is split by a two-way decomposition:
a prompt variant is scored by the mean reward of its members, and the weights are updated on each
member's reward minus its variant's mean, so a good prompt cannot masquerade as a good direction.
When the config names a skill library (`skills.library`), AHD `coevo` evolves that library instead of
prompt variants (`AHDSkillsCoevo`), with the same split generalised to N skills (`coevo.credit`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from coevo.candidate import Candidate
from coevo.credit import group_residuals
from coevo.operators.constants import tunable_values
from coevo.operators.eoh import ProposalRequest
from coevo.operators.records import Parent, TextProposal, direction
from coevo.operators.reflection import ComponentRewriter, Reflector
from coevo.operators.templates import PromptTemplates, default_templates
from coevo.population import PromptVariant, as_parent
from coevo.run.library import library_codes
from coevo.skills.ahd import SandboxTests, ValScore, failed_children, skills_request
from coevo.skills.credit import shown_to
from coevo.skills.gates import AcceptanceGate, CodeTestGate, RecurrenceGate
from coevo.skills.loop import SkillLoop, failed_trajectories
from coevo.skills.render import by_credit
from coevo.skills.pinning import LibraryChanged
from coevo.workload import Member, Trajectory

if TYPE_CHECKING:
    from coevo.es.perturbation import Perturbation
    from coevo.run.config import RunConfig
    from coevo.run.runner import Runner

CROSSOVERS = ("e1", "e2")
HINT_TOKENS = 96
REWRITE_TOKENS = 384
"""Answer lengths of the prompt-side calls, whatever `llm.max_new_tokens` allows heuristics."""


def improvement_reward(parent: float, child: float | None, worst: float) -> float:
    """Reference eoh+es reward P - C_eff, on fitness (higher is better): C - P. A child that is invalid
    or worse than the population's worst counts as C_eff = max(W, P - 1), so failures are penalised by
    a bounded amount."""
    if child is None or child < worst:
        return max(worst, parent - 1.0) - parent
    return child - parent


class Method:
    """A policy: the phases of a generation and what each does. Generation 0 is always `init`.

    Each method declares itself once, here on its class: its config name, whether it evolves the
    weights (and so needs an ES engine and a weight-capable backend), and its phases.
    """

    name: ClassVar[str]
    uses_weights: ClassVar[bool] = False
    phases: ClassVar[tuple[str, ...]] = ()
    workloads: ClassVar[tuple[str, ...]] = ("ahd",)
    """The workload kinds (`workload.kind`) this method can run on."""
    extra: ClassVar[tuple[str, str] | None] = None
    """(module, pip extra) an optional dependency the method needs, checked before any model loads."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    @classmethod
    def takes(cls, config: RunConfig) -> bool:
        """Whether this class runs `config`, one of its method's: by workload kind, and for AHD `coevo`
        by whether the config names a skill library."""
        return config.workload.kind in cls.workloads

    def run_phase(self, runner: Runner, phase: str) -> None:
        if phase == "init":
            self.initialise(runner)
        else:
            self.generation_phase(runner, phase)

    def initialise(self, runner: Runner) -> None:
        """The skill library's heuristics, then i1 samples up to the population size."""
        library = runner.add_library(library_codes(runner.task, self.config.library))
        runner.population.add(library)
        missing = self.config.init_samples
        if missing is None:
            missing = self.config.population_size - len(library)
        if missing > 0:
            runner.population.add(runner.propose([ProposalRequest("i1")] * missing))

    def generation_phase(self, runner: Runner, phase: str) -> None:
        raise NotImplementedError

    # ES sizing; methods without weights never ask.
    def es_population(self, config: RunConfig) -> int:
        return config.population_size * config.es.directions_per_parent

    def planned_updates(self, config: RunConfig) -> int:
        return 1

    # The prompt side: one fixed variant unless the method evolves them.
    def initial_prompt(self) -> PromptVariant:
        templates = default_templates()
        return PromptVariant(prompt_id(templates, ""), templates)

    def heldout_view(self, runner: Runner) -> tuple[Member, str] | None:
        """(the text held-out episodes are played with, how reports name it); None: no text."""
        return None

    # State a method carries across steps beyond the runner's (committed with each step).
    def state(self) -> dict[str, Any] | None:
        return None

    def restore(self, state: dict[str, Any] | None) -> None:
        """Continue from `state()` of the last committed step."""

    def updates(self, runner: Runner) -> str:
        """What the live weights have received so far, in this method's words (held-out lines)."""
        return f"{0 if runner.engine is None else runner.engine.step} ES updates"

    def refill(self, runner: Runner) -> bool:
        """With no valid heuristic left, sample a fresh population from scratch; True if it did."""
        if runner.population.members:
            return False
        runner.population.add(runner.propose([ProposalRequest("i1")] * self.config.population_size))
        return True


class Sample(Method):
    name = "sample"
    phases = ("sample",)

    def initialise(self, runner: Runner) -> None:
        runner.population.add(runner.add_library(library_codes(runner.task, self.config.library)))

    def generation_phase(self, runner: Runner, phase: str) -> None:
        runner.population.add(runner.propose([ProposalRequest("i1")] * self.config.sample_batch))


class SampleES(Sample):
    name = "sample+es"
    uses_weights = True

    def es_population(self, config: RunConfig) -> int:
        return config.sample_batch

    def planned_updates(self, config: RunConfig) -> int:
        return math.ceil(config.budget / config.sample_batch)

    def generation_phase(self, runner: Runner, phase: str) -> None:
        members = runner.engine.ask()
        children = runner.propose([ProposalRequest("i1")] * len(members), members)
        runner.tell(members[: len(children)], [c.fitness for c in children])
        runner.population.add(children)


class EoH(Method):
    name = "eoh"
    phases = ("e1", "e2", "m1", "m2")

    def generation_phase(self, runner: Runner, phase: str) -> None:
        if self.refill(runner):
            return
        if phase in CROSSOVERS and len(runner.population) < 2:
            return
        self.offspring(runner, phase)

    def offspring(self, runner: Runner, operator: str) -> None:
        size = 2 if operator in CROSSOVERS else 1
        requests = [
            ProposalRequest(operator, tuple(as_parent(p) for p in runner.population.select(runner.rng, size)))
            for _ in range(self.config.population_size)
        ]
        runner.population.add(runner.propose(requests))

    def planned_updates(self, config: RunConfig) -> int:
        return 2 * planned_generations(config, 2 * config.population_size + 2 * self.es_population(config))


class EoHES(EoH):
    name = "eoh+es"
    uses_weights = True

    def offspring(self, runner: Runner, operator: str) -> None:
        if operator in CROSSOVERS:
            return super().offspring(runner, operator)
        members = runner.engine.ask()
        parents = [runner.population.select(runner.rng, 1)[0] for _ in members]
        worst = runner.population.worst_fitness
        children = runner.propose([ProposalRequest(operator, (as_parent(p),)) for p in parents], members)
        rewards = [improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(parents, children, strict=False)]
        runner.tell(members[: len(children)], rewards)
        runner.population.add(children)


class ESEachGeneration(Method):
    """ES sizing of the joint AHD methods: a generation is one ES population, a child per member, and
    ends in one update."""

    uses_weights = True

    def planned_updates(self, config: RunConfig) -> int:
        return planned_generations(config, self.es_population(config))


class Coevo(ESEachGeneration):
    name = "coevo"
    phases = ("joint",)

    def generation_phase(self, runner: Runner, phase: str) -> None:
        if self.refill(runner):
            return
        population = runner.population
        members = runner.engine.ask()
        variants = runner.prompts.assign(runner.rng, len(members))
        operators = self.config.coevo.operators
        requests, judged_against = [], []
        for index, variant in enumerate(variants):
            operator = operators[index % len(operators)]
            if operator in CROSSOVERS and len(population) < 2:
                operator = "m1"
            parents = [] if operator == "i1" else population.select(runner.rng, 2 if operator in CROSSOVERS else 1)
            if operator == "tune" and not tunable_values(parents[0].code):
                operator = "m2"  # nothing to retune: change the parameters the EoH way
            requests.append(
                ProposalRequest(operator, tuple(as_parent(p) for p in parents), variant.notes, variant.templates)
            )
            judged_against.append(max(parents, key=lambda p: p.fitness, default=population.members[-1]))
        worst = population.worst_fitness
        children = runner.propose(requests, members, [v.id for v in variants])
        variants = variants[: len(children)]
        rewards = [
            improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(judged_against, children, strict=False)
        ]
        by_variant: dict[str, list[float]] = defaultdict(list)
        for variant, reward in zip(variants, rewards, strict=True):
            by_variant[variant.id].append(reward)
        residuals = group_residuals([v.id for v in variants], rewards)
        runner.tell(members[: len(children)], residuals)
        runner.prompts.record(by_variant)
        population.add(children)
        if runner.budget_left:
            self.mutate_prompt(runner, children, variants, judged_against)

    def mutate_prompt(
        self,
        runner: Runner,
        children: Sequence[Candidate],
        variants: Sequence[PromptVariant],
        judged_against: Sequence[Candidate],
    ) -> None:
        """Rewrite one component of the best variant from how its children fared against the parent
        each was judged against (its best parent, or the population's worst for i1); admit the result."""
        best = runner.prompts.best
        components = self.config.coevo.components
        component = components[(runner.generation - 1) % len(components)]
        mine = [(c, p) for c, v, p in zip(children, variants, judged_against, strict=False) if v.id == best.id]
        sampling = runner.sampling_for_call()
        if component == "notes":
            pair = _reflection_pair(runner, [c for c, _ in mine] or list(children))
            if pair is None:
                return
            reflector = Reflector(
                runner.llm, runner.task, runner.ledger, best.templates, replace(sampling, max_new_tokens=HINT_TOKENS)
            )
            items = reflector.short([pair])
            if best.notes and isinstance(items[0], TextProposal):  # fold the hint into the notes it extends
                items.append(reflector.long(best.notes, [items[0].text]))
            runner.record_text(items, best.id)
            if not isinstance(items[-1], TextProposal):
                return
            templates, notes = best.templates, items[-1].text
        else:
            shown = mine or zip(children, judged_against)
            feedback = [_feedback_line(child, parent, runner.task.sense) for child, parent in shown][:6]
            rewriter = ComponentRewriter(runner.llm, runner.ledger, replace(sampling, max_new_tokens=REWRITE_TOKENS))
            items = rewriter.rewrite(best.templates, component, feedback)
            runner.record_text(items, best.id)
            if not isinstance(items[0], TextProposal):
                return
            templates, notes = best.templates.with_component(component, items[0].text), best.notes
        variant = PromptVariant(prompt_id(templates, notes), templates, notes, parent=best.id, changed=component)
        if all(v.id != variant.id for v in runner.prompts.variants) and runner.prompts.admit(variant) is not variant:
            runner.register_prompt(variant)


class MembersArePopulation:
    """ES sizing of the agent methods: one generation is `population_size` members, each one evaluation."""

    def es_population(self, config: RunConfig) -> int:
        return config.population_size

    def planned_updates(self, config: RunConfig) -> int:
        return math.ceil(config.budget / config.population_size)


class AgentES(MembersArePopulation, Method):
    """`es` on an agent's weights alone (REFERENCES section 7): each member plays the generation's
    episodes under its own perturbation, and its mean episode reward is its ES reward."""

    name = "es"
    uses_weights = True
    phases = ("es",)
    workloads = ("agent",)

    def initialise(self, runner: Runner) -> None:
        """No members yet: measure the base weights on the held-out split, to compare with at the end."""
        from coevo.run.heldout import record_heldout

        record_heldout(runner, "before")

    def generation_phase(self, runner: Runner, phase: str) -> None:
        members = runner.engine.ask()
        evaluations = runner.play(members)
        runner.tell(members[: len(evaluations)], [e.reward for e in evaluations])


class CarriesSkills:
    """A method whose skill library (`coevo.skills.loop`) is carried across steps and pinned on resume."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)  # type: ignore[call-arg]
        self.skills = SkillLoop()

    def state(self) -> dict[str, Any]:
        return self.skills.state()

    def restore(self, state: dict[str, Any] | None) -> None:
        from coevo.run.config import ConfigError

        try:
            self.skills.restore(state, self.config.skills.library)
        except LibraryChanged as exc:
            raise ConfigError(str(exc)) from None


class AgentSkills(CarriesSkills, Method):
    """The skill-library methods of the agent workload (REFERENCES section 8); `coevo.skills.loop`
    holds their logic, each subclass says what weights its members carry and when it learns."""

    workloads = ("agent",)

    def initialise(self, runner: Runner) -> None:
        """Pin the starting library, then measure it with the base weights on the held-out split."""
        from coevo.run.heldout import record_heldout

        self.skills.start(runner)
        record_heldout(runner, "before")

    def heldout_view(self, runner: Runner) -> tuple[Member, str]:
        return self.skills.heldout_view(runner)


class AHDSkills(CarriesSkills, EoH):
    """`skills` on an AHD task, weights fixed: EoH offspring (e1 e2 m1 m2 in turn), each request shown
    its own half of the library (`shown_to`) as hints, text procedures and helper functions alike. A
    child that calls a helper it was shown gets its source in its code (`ProposalRequest.helpers`), so
    the usual validation runs on what is stored. Each skill is credited with its effect on the
    improvement reward against its absence; the failed children are analysed into edits. Code skills,
    at the start and when proposed, are kept only if their tests pass in the task's sandbox; an edit
    must recur (`min_sources`) and strictly raise the val fitness of one m1 child of the population's
    best written with the library (`ValScore`)."""

    name = "skills"
    phases = ("skills",)

    def initialise(self, runner: Runner) -> None:
        self.skills.start(runner, [self.tests_gate(runner)])
        super().initialise(runner)

    def tests_gate(self, runner: Runner) -> CodeTestGate:
        return CodeTestGate(SandboxTests(runner.evaluator, runner.task.seed_code()))

    def generation_phase(self, runner: Runner, phase: str) -> None:
        if self.refill(runner):
            return
        children, rewards, _ = self.offspring_shown(runner, None)
        runner.population.add(children)
        if runner.budget_left:
            self.learn(runner, failed_children(runner.generation, children, rewards))

    def offspring_shown(
        self, runner: Runner, members: Sequence[Perturbation] | None
    ) -> tuple[list[Candidate], list[float], list[float]]:
        """One child per request (`population_size` of them, or one per ES member written under it),
        request i shown its own subset of the library; returns the children, their improvement rewards
        and those rewards less the shown skills' additive effects (what ES is told). The shown skills'
        uses and credit move with the rewards."""
        settings, population = self.config.skills, runner.population
        ranked = by_credit(self.skills.library)
        count = self.config.population_size if members is None else len(members)
        subsets = shown_to([s.name for s in ranked], count, self.config.seed, runner.generation, settings.show_share)
        requests, judged_against, shown = [], [], []
        for index, subset in enumerate(subsets):
            operator = EoH.phases[index % len(EoH.phases)]
            if operator in CROSSOVERS and len(population) < 2:
                operator = "m1"
            parents = population.select(runner.rng, 2 if operator in CROSSOVERS else 1)
            mine = [s for s in ranked if s.name in subset]
            request, rendered = skills_request(operator, [as_parent(p) for p in parents], mine, settings.prompt_tokens)
            requests.append(request)
            judged_against.append(max(parents, key=lambda p: p.fitness))
            shown.append(rendered)
        worst = population.worst_fitness
        children = runner.propose(requests, members)
        rewards = [
            improvement_reward(p.fitness, c.fitness, worst) for p, c in zip(judged_against, children, strict=False)
        ]
        return children, rewards, self.skills.record(runner.generation, shown[: len(children)], rewards)

    def learn(self, runner: Runner, failed: Sequence[tuple[str, Trajectory]]) -> None:
        """Edits from the `failed` children, gated by recurrence, the code skills' sandbox tests and the
        val score of an m1 child of the population's best (none without a valid heuristic to write it from)."""
        best = runner.population.best
        if best is None:
            return
        with runner.evaluator_for("val") as val:
            heldout = ValScore(runner, as_parent(best), val, runner.sampling_for_call())
            gates = (RecurrenceGate(self.config.skills.min_sources), self.tests_gate(runner), AcceptanceGate(heldout))
            self.skills.learn(runner, failed, gates)


class AHDESThenSkills(ESEachGeneration, AHDSkills):
    """`es-then-skills` on an AHD task: the `skills` generation with every child written under its own
    ES perturbation and the starting library's content fixed; ES is told each improvement reward less
    the shown skills' additive effects, as on the agent workload. The failed children of every
    generation are kept (in the step state), and once the budget is spent they are distilled once into
    edits, through the gates of `skills`."""

    name = "es-then-skills"
    phases = ("joint",)

    def generation_phase(self, runner: Runner, phase: str) -> None:
        if not self.refill(runner):
            children, rewards = self.evolve(runner)
            self.skills.trajectories += failed_children(runner.generation, children, rewards)
        if not runner.budget_left:
            self.learn(runner, self.skills.trajectories)

    def evolve(self, runner: Runner) -> tuple[list[Candidate], list[float]]:
        """One ES generation of skill-shown children: the ES update, the children added; returns them
        with their improvement rewards."""
        members = runner.engine.ask()
        children, rewards, residuals = self.offspring_shown(runner, members)
        runner.tell(members[: len(children)], residuals)
        runner.population.add(children)
        return children, rewards


class AHDSkillsCoevo(AHDESThenSkills):
    """`coevo` on an AHD task whose config names a skill library (`skills.library`; an empty directory
    starts from none): each generation's skill-shown children, written under ES perturbations, give
    both the ES update and the failed children the edits are learned from (not after the last one,
    which no generation would use). Without `skills.library`, AHD `coevo` evolves prompt variants
    (`Coevo`)."""

    name = "coevo"

    @classmethod
    def takes(cls, config: RunConfig) -> bool:
        return super().takes(config) and config.skills.library is not None

    def generation_phase(self, runner: Runner, phase: str) -> None:
        if self.refill(runner):
            return
        children, rewards = self.evolve(runner)
        if runner.budget_left:
            self.learn(runner, failed_children(runner.generation, children, rewards))


class Skills(AgentSkills):
    """`skills`: fixed weights; every generation learns edits from its failed episodes."""

    name = "skills"
    phases = ("skills",)

    def generation_phase(self, runner: Runner, phase: str) -> None:
        evaluations, _ = self.skills.play(runner, [None] * self.config.population_size)
        self.skills.learn(runner, failed_trajectories(runner.generation, evaluations))


class AgentCoevo(MembersArePopulation, AgentSkills):
    """`coevo` on the agent workload: each generation's members (perturbations, the library as their
    text) give both the ES update and the failed episodes the skill edits are learned from."""

    name = "coevo"
    uses_weights = True
    phases = ("joint",)

    def generation_phase(self, runner: Runner, phase: str) -> None:
        members = runner.engine.ask()
        evaluations, residuals = self.skills.play(runner, members)
        runner.tell(members[: len(evaluations)], residuals)
        self.skills.learn(runner, failed_trajectories(runner.generation, evaluations))


class ESThenSkills(AgentCoevo):
    """`es-then-skills`: ES generations with the starting library fixed, collecting failed episodes;
    once the budget is spent, one distillation of all of them into skill edits."""

    name = "es-then-skills"

    def generation_phase(self, runner: Runner, phase: str) -> None:
        members = runner.engine.ask()
        evaluations, residuals = self.skills.play(runner, members)
        runner.tell(members[: len(evaluations)], residuals)
        self.skills.trajectories += failed_trajectories(runner.generation, evaluations)
        if not runner.budget_left:
            self.skills.learn(runner, self.skills.trajectories)


class AgentGRPO(AgentES):
    """The gradient baseline on the same episodes: one TRL GRPO step per generation, groups of
    `population_size` rollouts per search episode, every turn trained with its episode's group-normalised
    advantage (`coevo.rl.grpo`). A group's rollouts play as
    many episodes as an `es` generation's members, so each step is charged `population_size` evaluations
    and equal budgets mean equal episodes. Held-out success is measured before and after as for `es`."""

    name = "grpo"
    phases = ("grpo",)
    extra = ("trl", "rl")

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._stepper = None

    @property
    def steps(self) -> int:
        """GRPO steps taken so far (the stepper counts them; none before it exists)."""
        return self._stepper.steps if self._stepper else 0

    def updates(self, runner: Runner) -> str:
        return f"{self.steps} GRPO steps"

    def state(self) -> dict[str, Any]:
        return {"grpo_steps": self.steps}

    def restore(self, state: dict[str, Any] | None) -> None:
        """Refused once a step has moved the weights: the ES history cannot replay them, and TRL's
        optimizer state is not stored (before the first step there is nothing to lose)."""
        from coevo.run.config import ConfigError

        if state and state["grpo_steps"]:
            raise ConfigError(
                f"a grpo run cannot be resumed after its {state['grpo_steps']} GRPO step(s); start it again"
            )

    def generation_phase(self, runner: Runner, phase: str) -> None:
        from coevo.rl.grpo import GRPOSettings, GRPOStepper

        settings = self.config.workload
        if self._stepper is None:
            self._stepper = GRPOStepper(
                runner.llm,
                settings.env,
                settings.agent_horizon,
                settings.episodes,
                runner.run_dir / "grpo",
                GRPOSettings(num_generations=self.config.population_size),
                seed=self.config.seed,
            )
        metrics = self._stepper.step(list(runner.generation_workload().seeds))
        with open(runner.run_dir / "grpo_history.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps({"generation": runner.generation, **metrics}) + "\n")
        runner.charge(self.config.population_size)


def initial_evaluations(config: RunConfig) -> int:
    """What generation 0 spends: the library (one seed; evolved extras are not counted) and i1 samples."""
    library = 0 if config.library == "none" else 1
    samples = config.population_size - library if config.init_samples is None else config.init_samples
    return library + max(samples, 0)


def planned_generations(config: RunConfig, per_generation: int) -> int:
    """Generations the budget allows after generation 0, at least one."""
    return max(1, math.ceil((config.budget - initial_evaluations(config)) / per_generation))


def _feedback_line(child: Candidate, parent: Candidate, sense: Literal["min", "max"]) -> str:
    """One line of evaluator feedback for the rewriter, in the task's natural sign and direction."""
    if not child.valid:
        return f"{child.operator} child was invalid: {child.reason}"
    verdict = "better than" if child.fitness > parent.fitness else "not better than"
    return (
        f"{child.operator} child scored {child.objective:.4g}, {verdict} its parent"
        f" ({parent.objective:.4g}; {direction(sense)})"
    )


def _reflection_pair(runner: Runner, children: Sequence[Candidate]) -> tuple[Parent, Parent] | None:
    """(the population's best, the worst valid child below it) to reflect on, or None if no such pair."""
    best = runner.population.best
    worse = [c for c in children if c.valid and best is not None and c.fitness < best.fitness]
    if not worse:
        return None
    return as_parent(best), as_parent(min(worse, key=lambda c: c.fitness))


def prompt_id(templates: PromptTemplates, notes: str) -> str:
    """Content hash of a prompt variant: equal prompts share an id across runs."""
    payload = json.dumps({"templates": templates.to_dict(), "notes": notes}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


METHOD_CLASSES: tuple[type[Method], ...] = (
    Sample,
    EoH,
    SampleES,
    EoHES,
    AHDSkillsCoevo,
    Coevo,
    AgentES,
    AgentGRPO,
    Skills,
    AgentCoevo,
    ESThenSkills,
    AHDSkills,
    AHDESThenSkills,
)
"""Every method; a name may have several classes (`coevo`: AHD with a skill library, AHD, agent), and
the first that `takes` a config runs it."""

METHODS: dict[str, type[Method]] = {}
"""Every method by its config name (the first class of a name); the config's valid names derive from it."""
for _method in METHOD_CLASSES:
    METHODS.setdefault(_method.name, _method)


def method_class(config: RunConfig) -> type[Method]:
    """The class that runs `config` (the first of its method's name if none takes it)."""
    return next((m for m in METHOD_CLASSES if m.name == config.method and m.takes(config)), METHODS[config.method])
