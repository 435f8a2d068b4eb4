"""The skill loop of the agent workload: play with the rendered library, learn edits from failures.

Each generation the members play the generation's episodes with the current library rendered as
their instruction text, each member shown its own half of it so every skill's effect is measured
against its absence (`coevo.skills.skill_credit`); the failed trajectories are analysed into a few edits,
and an edit is kept only if its lesson recurred in two or more trajectories and the library with it
strictly beats the library without it on a fixed held-out batch (val episodes under the live weights). Refused edits are
buffered and shown to the proposer. The `skills`, agent `coevo` and `es-then-skills` methods differ
only in what weights the members carry and when the loop learns; this module is their shared part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from coevo.credit_split import additive_residuals, effects_against_absence
from coevo.skills.edits import AddSkill
from coevo.skills.gates import AcceptanceGate, Gate, RecurrenceGate, Refusal, RefusedBuffer, admit
from coevo.skills.library import Library
from coevo.skills.pinning import (
    check_pin,
    export_to_run_dir,
    library_from_state,
    library_state,
    pin,
    starting_library,
)
from coevo.skills.proposer import EditProposer
from coevo.skills.pruning import merge_duplicates
from coevo.skills.render import by_credit, render_prompt
from coevo.skills.retrieve import retrieved
from coevo.skills.settings import SkillsSettings
from coevo.skills.skill import Skill
from coevo.skills.skill_credit import credited, shown_to
from coevo.workload import Evaluation, Member, Trajectory

if TYPE_CHECKING:
    from coevo.context import EpisodeContext, RunContext
    from coevo.es.perturbation import Perturbation

SUCCESS = 1.0
"""An episode below this reward counts as failed (a success env's reward is 0 or 1)."""


@dataclass
class SkillLoop:
    settings: SkillsSettings = field(default_factory=SkillsSettings)
    seed: int = 0
    """The run's seed: which members each skill is shown to derives from it and the generation."""
    library: Library = field(default_factory=Library)
    pinned: dict[str, str] = field(default_factory=dict)
    refused: RefusedBuffer = field(default_factory=RefusedBuffer)
    trajectories: list[tuple[str, Trajectory]] = field(default_factory=list)
    """Failed trajectories kept for a later distillation (es-then-skills)."""

    def start(self, context: RunContext, gates: Sequence[Gate] = ()) -> None:
        """Generation 0: load the configured library and pin its skills' hashes in the step state; with
        `gates`, each starting skill is kept only if they pass it (the refused ones are buffered)."""
        loaded = starting_library(self.settings.library)
        self.pinned = pin(loaded)
        additions = [AddSkill(s) for s in loaded.values()]
        self.library = admit(Library(), additions, gates, self.refused) if gates else loaded
        export_to_run_dir(self.library, context.run_dir)

    def rendered(self) -> tuple[str, list[str]]:
        return render_prompt(by_credit(self.library), self.settings.prompt_tokens)

    def play(
        self, context: EpisodeContext, perturbations: Sequence[Perturbation | None]
    ) -> tuple[list[Evaluation], list[float | None]]:
        """The members' evaluations, each member shown its own subset of the library (`shown_to`), and
        the rewards ES is told: each member's reward less its skills' estimated effects. The shown
        skills' uses and credit are updated from the rewards."""
        settings = self.settings
        ranked = by_credit(self.library)
        names = [s.name for s in ranked]
        subsets = shown_to(names, len(perturbations), self.seed, context.generation, settings.show_share)
        views, shown = zip(*(member_view([s for s in ranked if s.name in subset], settings) for subset in subsets))
        evaluations = context.play(perturbations, views, traces=True)
        valid = [i for i, e in enumerate(evaluations) if e.reward is not None]
        residuals = self.record(context.generation, [shown[i] for i in valid], [evaluations[i].reward for i in valid])
        es_rewards: list[float | None] = [None] * len(evaluations)
        for i, residual in zip(valid, residuals, strict=True):
            es_rewards[i] = residual
        return evaluations, es_rewards

    def record(self, generation: int, shown: Sequence[frozenset[str]], rewards: Sequence[float]) -> list[float]:
        """Count the uses of the skills `shown` and move their credit by their effects on `rewards` (member
        i was shown `shown[i]`); returns each member's reward less its skills' additive effects, the
        reward ES is told, so a skill's help is not credited to the member's direction."""
        library = self.library.with_uses(set().union(*shown), generation)
        self.library = credited(library, shown, rewards)
        if not rewards:
            return []
        return additive_residuals(shown, rewards, effects_against_absence(shown, rewards))

    def heldout_view(self) -> tuple[Member, str]:
        """The whole library as held-out episodes see it, and its name in reports: hash and skills."""
        view, _ = member_view(by_credit(self.library), self.settings)
        names = ", ".join(self.library) or "empty"
        return view, f"{self.library.hash[:12]} ({names})"

    def learn(
        self, context: RunContext, failed: Sequence[tuple[str, Trajectory]], gates: Sequence[Gate] | None = None
    ) -> None:
        """Propose edits from `failed` trajectories, admit the ones `gates` pass (default: recurrence,
        then the held-out batch of the agent workload, which needs an `EpisodeContext`), export the library."""
        settings = self.settings
        sampling = replace(context.sampling_for_call(), max_new_tokens=settings.answer_tokens)
        proposer = EditProposer(context.llm, sampling, settings.analyses, settings.max_edits)
        edits, calls = proposer.propose(self.library, self.rendered()[0], failed, self.refused)
        context.record_text(calls)
        if gates is None:
            heldout = AcceptanceGate(lambda library: heldout_score(context, settings, library))
            gates = [RecurrenceGate(settings.min_sources), heldout]
        admitted = admit(self.library, edits, gates, self.refused, context.generation)
        self.library = merge_duplicates(admitted, context.generation)
        export_to_run_dir(self.library, context.run_dir)

    def state(self) -> dict[str, Any]:
        return {
            "library": library_state(self.library),
            "pinned": self.pinned,
            "refused": [asdict(r) for r in self.refused.refusals],
            "trajectories": [[source, _trajectory_json(t)] for source, t in self.trajectories],
        }

    def restore(self, state: dict[str, Any], library_path: str | None) -> None:
        """Continue from a step state; raises LibraryChanged if the pinned starting library changed."""
        check_pin(library_path, state["pinned"])
        self.pinned = state["pinned"]
        self.library = library_from_state(state["library"])
        self.refused = RefusedBuffer([Refusal(**r) for r in state["refused"]])
        self.trajectories = [(source, _trajectory_from_json(t)) for source, t in state["trajectories"]]


def failed_trajectories(generation: int, evaluations: Sequence[Evaluation]) -> list[tuple[str, Trajectory]]:
    """(source id, trajectory) of every failed episode; the id names generation, member and instance."""
    return [
        (f"g{generation}/m{index}/{trajectory.instance}", trajectory)
        for index, evaluation in enumerate(evaluations)
        for trajectory in evaluation.trajectories or ()
        if trajectory.reward < SUCCESS
    ]


def member_view(skills: Sequence[Skill], settings: SkillsSettings) -> tuple[Member, frozenset[str]]:
    """(the member's text, the skills it may be shown): `skills` rendered in order within the token
    budget, or with retrieval each observation's top-k of them, rendered within the same budget."""
    if settings.retrieve is None:
        text, names = render_prompt(skills, settings.prompt_tokens)
        return Member(text), frozenset(names)
    k, budget = settings.retrieve, settings.prompt_tokens

    def text_for(observation: str) -> str:
        return render_prompt(retrieved(skills, observation, k), budget)[0]

    return Member("", retrieve=text_for), frozenset(s.name for s in skills)


def heldout_score(context: EpisodeContext, settings: SkillsSettings, library: Library) -> float:
    """Mean reward of the whole `library` as the text, under the live weights, on the gate's val batch."""
    view, _ = member_view(by_credit(library), settings)
    gate = context.workload.on_split("val", settings.heldout_episodes)
    (evaluation,) = gate.evaluate([view])
    return evaluation.reward or 0.0


def _trajectory_json(trajectory: Trajectory) -> dict[str, Any]:
    return asdict(trajectory)


def _trajectory_from_json(data: dict[str, Any]) -> Trajectory:
    from coevo.workload import Turn

    return Trajectory(data["instance"], tuple(Turn(**turn) for turn in data["turns"]), data["reward"])
