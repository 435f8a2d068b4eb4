"""The contract between the run loop and a method: what the loop offers (a context) and what a method
offers back (`Policy`).

A method never sees the loop itself. It reaches the LLM, the workload, the ES engine, the budget and
the records only through the context of its workload's family (`coevo.family`): `HeuristicContext`
where members are heuristics the LLM writes, `EpisodeContext` where they are text an agent plays
with, both built on `RunContext`. So a method can be written, read and tested against this page alone
(on a fake context of its family), and the loop (`coevo.run.runner.Runner`) can change how it provides
each service without touching any method. The skill loops (`coevo.skills`) take the same contexts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np

    from coevo.candidate import Candidate
    from coevo.es.engine import UpdateStats
    from coevo.es.perturbation import Perturbation
    from coevo.evaluate.evaluator import Evaluator
    from coevo.islands import IslandPopulation
    from coevo.llm.base import LLM, SamplingParams
    from coevo.llm.ledger import BudgetLedger
    from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
    from coevo.operators.records import Proposal, Rejection, TextProposal
    from coevo.population import PromptPool, PromptVariant
    from coevo.workload import EpisodeWorkload, Evaluation, HeuristicWorkload, Member
    from tasks.base import SplitName, Task


@dataclass(frozen=True)
class RunFacts:
    """What a method may know of the run beyond its own `[settings]`: its seed and budget, the
    population it keeps, how it starts, and how ES pairs and rewards its members. A method is built
    from these and its settings, never from the whole config."""

    seed: int
    budget: int
    population_size: int
    library: str = "seed"
    """What the population starts from: none, the task's seed, or seed + evolved (`heuristics/`)."""
    init_samples: int | None = None
    """i1 samples in generation 0 (None: fill the population after the library)."""
    antithetic: bool = True
    """ES members come in mirrored pairs (+eps, -eps) that share their text."""
    reward: str = "quality"
    """What ES is told for a heuristic: its quality, or its improvement on its parent."""
    directions_per_parent: int = 1


class RunContext(Protocol):
    """What a method of any family may use during one step. Everything it records lands in that step's
    commit; everything it spends is charged to the run's budget."""

    llm: LLM
    ledger: BudgetLedger
    """Token usage of the LLM calls a method makes itself (reflections, rewrites, skill edits)."""
    prompts: PromptPool
    rng: np.random.Generator
    """The run's random stream (parent selection, prompt assignment), restored exactly on resume."""
    run_dir: Path

    @property
    def generation(self) -> int: ...

    @property
    def budget_left(self) -> int: ...

    @property
    def es_updates(self) -> int:
        """ES updates the live weights have received (0 without an engine)."""
        ...

    def charge(self, evaluations: int, llm_calls: int = 0) -> None:
        """Count evaluations a method spent on its own, and the LLM calls they took that no other
        service recorded (episodes it played itself)."""
        ...

    def ask(self) -> list[Perturbation]:
        """The ES engine's members for this generation."""
        ...

    def tell(self, perturbations: Sequence[Perturbation], rewards: Sequence[float | None]) -> UpdateStats:
        """One ES update from the members' rewards (None: invalid member)."""
        ...

    def sampling_for_call(self) -> SamplingParams:
        """Sampling settings with this step's next seed (a pure function of run seed, step and call)."""
        ...

    def record_text(self, items: Sequence[Proposal | TextProposal | Rejection], prompt_id: str | None = None) -> None:
        """Store LLM calls that make no candidate (reflections, prompt rewrites, probes)."""
        ...

    def register_prompt(self, variant: PromptVariant) -> None: ...


class HeuristicContext(RunContext, Protocol):
    """The heuristic family's context: members are heuristics the LLM writes for a task, scored in a
    sandbox and kept in a population."""

    task: Task
    workload: HeuristicWorkload
    operators: EoHOperators
    """Writes heuristics from proposal requests without recording or scoring them."""
    population: IslandPopulation
    """The run's islands of heuristics (one by default): methods add children and select parents."""

    def propose(
        self,
        requests: Sequence[ProposalRequest],
        perturbations: Sequence[Perturbation] | None = None,
        prompt_ids: Sequence[str | None] | None = None,
    ) -> list[Candidate]:
        """One heuristic per request (request i under perturbation i if given), scored and recorded;
        requests beyond the budget are dropped."""
        ...

    def add_library(self, codes: dict[str, str]) -> list[Candidate]:
        """Known heuristics (name -> code) scored, recorded and charged."""
        ...

    @property
    def evaluator(self) -> Evaluator:
        """The sandboxed evaluator members are scored by."""
        ...

    def evaluator_for(self, split: SplitName) -> Evaluator:
        """An evaluator of `split` under the run's eval settings, for held-out checks a method makes."""
        ...


class EpisodeContext(RunContext, Protocol):
    """The episode family's context: members are text an agent is shown while it plays the
    generation's episodes under the members' weights; the run is judged on held-out episodes."""

    workload: EpisodeWorkload

    def play(
        self, perturbations: Sequence[Perturbation | None], shown: str | Sequence[Member] = "", traces: bool = False
    ) -> list[Evaluation]:
        """Members scored on this generation's episodes (under perturbation i each; None: the live
        weights), charged to the budget."""
        ...

    def generation_workload(self) -> EpisodeWorkload:
        """The workload over this generation's episodes."""
        ...

    def record_heldout(self, when: str) -> Any:
        """Measure the live weights (and the method's text) on the held-out episodes and keep the figure
        under `when` ("before", "after")."""
        ...


class Policy(Protocol):
    """A method as the loop drives it: the phases of a generation (generation 0 is always `init`), what
    each does with the context, its ES sizing and the state it carries across steps."""

    name: ClassVar[str]
    uses_weights: ClassVar[bool]
    phases: ClassVar[tuple[str, ...]]

    def run_phase(self, context: Any, phase: str) -> None:
        """`context`: the context of the run's family (one of the families the method names)."""
        ...

    def prompt_pool(self) -> PromptPool: ...

    def es_population(self) -> int: ...

    def planned_updates(self) -> int: ...

    def heldout_view(self) -> tuple[Member, str] | None: ...

    def updates(self, context: RunContext) -> str: ...

    def state(self) -> dict[str, Any] | None: ...

    def restore(self, state: dict[str, Any] | None) -> None: ...
