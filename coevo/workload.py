"""The workload protocol: the one boundary where the loop hands members over and gets rewards back.

In the spirit of GEPA's adapter, a workload is the whole integration of a problem family: it scores
members (the evolved text, heuristic code or a prompt/skill, plus the weights it runs under) on its
batch of instances. What comes back is, per member, a reward per instance with **higher is better**
(always, whatever the task's natural sign), the trajectories when asked for, and feedback text for the
prompt-side operators. Failures come back as an `Evaluation` with a reason, never as an exception.

The natural-sign figures (`objective`, `gap_pct`) travel along for reports and the run store only;
`reward` and `rewards` are what selection and ES read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from coevo.candidate import Sense, WeightsRef, fitness_of

if TYPE_CHECKING:
    from coevo.evaluate.evaluator import Evaluator
    from tasks.agents.rollout import Episode


@dataclass(frozen=True)
class Member:
    """What one evaluation scores: the evolved text (code, or a prompt/skill) under some weights.

    `weights` is None where the text alone decides the score (AHD: the weights wrote the code and
    play no part in running it); an agent workload rolls the text out under these weights.
    """

    text: str
    weights: WeightsRef | None = None
    retrieve: Callable[[str], str] | None = None
    """Instance-dependent text (skill retrieval): given an observation, the text to show with it;
    None: `text` for every instance. Only workloads that show text before observations read it."""

    def text_for(self, observation: str) -> str:
        return self.text if self.retrieve is None else self.retrieve(observation)


@dataclass(frozen=True)
class Turn:
    """One step of an episode: what the policy saw, what it answered, and what that earned."""

    observation: str
    action: str
    reward: float
    tokens: int = 0


@dataclass(frozen=True)
class Trajectory:
    """One instance's episode under a member (a single turn for one-shot workloads)."""

    instance: str
    turns: tuple[Turn, ...]
    reward: float


@dataclass(frozen=True)
class Evaluation:
    """A member's verdict on the workload's instances.

    `per_instance` and `objective` are in the task's natural sign (`sense`); the loop reads the
    higher-is-better `rewards` and `reward` derived from them, so the sign is decided in one place.
    """

    sense: Sense
    split: str
    per_instance: tuple[float, ...]
    """Natural-sign score per instance; empty when the member is invalid."""
    objective: float | None
    """Mean natural-sign score; None when the member is invalid."""
    reason: str | None = None
    """Why the member is invalid; None when valid."""
    feedback: str = ""
    """Text for prompt-side operators (reflection, rewriting): what went right or wrong, in words."""
    trajectories: tuple[Trajectory, ...] | None = None
    """The episodes, when the caller asked for them and the workload has any."""
    gap_pct: float | None = None
    seconds: float = 0.0
    llm_calls: int = 0
    """LLM calls scoring the member took (an agent's turns; code scored in the sandbox takes none)."""

    @property
    def valid(self) -> bool:
        return self.reason is None

    @property
    def reward(self) -> float | None:
        """The member's higher-is-better score (its mean over instances); None when invalid."""
        return None if self.objective is None else fitness_of(self.objective, self.sense)

    @property
    def rewards(self) -> tuple[float, ...]:
        """Higher-is-better reward per instance; empty when invalid."""
        return tuple(fitness_of(value, self.sense) for value in self.per_instance)


class WorkloadSettings(BaseModel):
    """The `[workload]` table, what members are scored on: `kind` names the workload class; the other
    keys are the ones that class declares in its `settings_model`, a subclass of this model (below)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field("ahd", description="the workload: ahd (heuristics in the sandbox), agent (episodes), or a spec")

    @property
    def subject(self) -> str | None:
        """What the run works on, for run names and progress lines; None: the config's task."""
        return None


@runtime_checkable
class Workload(Protocol):
    """Scores members on one fixed batch of instances (a split, or its first N instances)."""

    name: str
    sense: Sense
    """The natural direction of the task's objective; only reports and prompts use it."""

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        """One `Evaluation` per member, in order; `traces` asks for trajectories."""
        ...

    def remember(self, texts: Iterable[str]) -> None:
        """Texts this run already evaluated (a resumed store), so content-keyed reuse survives a resume."""
        ...

    def close(self) -> None:
        """Release workers (sandboxes, environments); the workload is not used afterwards."""
        ...


class HeuristicWorkload(Workload, Protocol):
    """The heuristic family's workload: a member is code the LLM wrote, and its verdict depends on the code
    alone (the weights only wrote it), judged by a sandboxed evaluator, so a remote executor ships each
    distinct code once and gets the verdict back."""

    evaluator: Evaluator
    """The sandbox that judges code (a code skill's tests run in it too)."""

    def codes(self, members: Sequence[Member]) -> list[str]:
        """The code each member is scored as (a cosmetic copy of a scored heuristic stands for it)."""
        ...

    def verdicts(self, codes: Sequence[str]) -> list[Evaluation]:
        """The sandbox's verdicts on exactly `codes`, in order."""
        ...


class EpisodeWorkload(Workload, Protocol):
    """The episode family's workload: a member is text an agent is shown while it plays an environment's
    episodes under the member's weights. Each generation plays its own batch of search episodes; the run
    is judged on a held-out split no member was searched on, before, after and, every `heldout_every`
    generations, along the way (None: before and after only)."""

    env: str
    """The environment (`coevo tasks list`): a gradient baseline trains on the same one."""
    horizon: int
    seeds: tuple[int, ...]
    """The instance seeds of this batch's episodes, in order."""
    heldout: str
    heldout_every: int | None

    def at_generation(self, generation: int) -> EpisodeWorkload:
        """The batch generation `generation` (1 for the first after initialisation) is scored on."""
        ...

    def on_split(self, split: str, limit: int | None = None) -> EpisodeWorkload:
        """The same workload over `split`'s episodes (its first `limit`): a gate's val batch."""
        ...

    def evaluate_at(self, index: int, member: Member, *, traces: bool = False) -> Evaluation:
        """Member `index` of a batch alone, with the sampling it has among all of them (a remote worker's share)."""
        ...

    def heldout_episodes(self, member: Member) -> list[Episode]:
        """`member` under the live weights on the held-out split's episodes (each with its seed and success)."""
        ...
