"""Where a generation's members are played: in this process (`local`) or on a Ray cluster (`ray`).

The executor is a runtime choice, not part of a run's config: a member's episodes (an agent's) or
sampling seed (a heuristic's) are bound to its index, its weights to (ES step, seed, sign, sigma), so the
same run played here or on workers stores the same rewards and ends at the same weights, and a run
started on one executor may be resumed on the other. The driver stays the only writer of the run store;
an executor only hands evaluations (and the heuristics its workers wrote) back.

Executors are plugins: `--executor NAME` is a name registered under the entry-point group
``coevo.executors`` (coevo registers ``local`` and ``ray``), or ``path/to/file.py:Class`` /
``package.module:Class``. An executor class declares ``extra`` (None, or the (module, extra) it needs
installed) and ``from_config(config, address)``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from coevo.extras import install_hint
from coevo.plugins import PluginError, Registry
from coevo.run.config import ConfigError
from coevo.workload import EpisodeWorkload, Evaluation, HeuristicWorkload, Member

if TYPE_CHECKING:
    from coevo.es.update_log import UpdateRecord
    from coevo.run.config import RunConfig
    from coevo.run.proposals import ProposalJob, ProposedMember

EXECUTORS = Registry(
    "coevo.executors",
    "executor",
    lambda cls: None if callable(getattr(cls, "from_config", None)) else "it needs from_config",
)


class Executor(Protocol):
    """Plays one generation's members, or scores heuristics, and returns the evaluations in order."""

    def play(
        self,
        workload: EpisodeWorkload,
        members: Sequence[Member],
        *,
        generation: int,
        traces: bool,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        """Episodes: `workload` is the driver's view of generation `generation`; a remote executor
        rebuilds it, and moves its replicas to the members' weights with the ES records `history(since)` gives."""
        ...

    def score(
        self,
        workload: HeuristicWorkload,
        members: Sequence[Member],
        *,
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        """Heuristics need no weights: a remote executor scores the code `workload` names for each member."""
        ...

    def propose(
        self,
        jobs: Sequence[ProposalJob],
        *,
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[ProposedMember] | None:
        """Write each AHD ES member's heuristic under its perturbation and score it in the sandbox, in
        job order, on the executor's side; None: the runner writes and scores them in this process."""
        ...

    def close(self) -> None:
        """Release the workers; the run stays resumable."""
        ...


class LocalExecutor:
    """Every member in the driver's own process, through the workload itself."""

    extra = None

    @classmethod
    def from_config(cls, config: RunConfig, address: str | None = None) -> LocalExecutor:
        return cls()

    def play(
        self,
        workload: EpisodeWorkload,
        members: Sequence[Member],
        *,
        generation: int,
        traces: bool,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        return workload.evaluate(members, traces=traces)

    def score(
        self,
        workload: HeuristicWorkload,
        members: Sequence[Member],
        *,
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        return workload.evaluate(members, traces=True)

    def propose(
        self,
        jobs: Sequence[ProposalJob],
        *,
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> None:
        """The runner writes the members in this process."""

    def close(self) -> None:
        """Nothing to release."""


def executor_class(name: str) -> type:
    """The class of executor `name`; ConfigError (one line) before any model loads when it is unknown
    (listing the registered ones), cannot load, or needs an extra that is not installed here."""
    try:
        cls = EXECUTORS.get(name)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    extra = getattr(cls, "extra", None)
    if extra is not None and importlib.util.find_spec(extra[0]) is None:
        raise ConfigError(f"--executor {name} needs the {extra[1]} extra: {install_hint(extra[1])}")
    return cls


def open_executor(name: str, config: RunConfig, address: str | None = None) -> Executor:
    """The executor `name` for a run of `config` (`address`: a cluster to join, for executors that
    join one); opened before the run's store, so a cluster that cannot be joined leaves nothing."""
    return executor_class(name).from_config(config, address)
