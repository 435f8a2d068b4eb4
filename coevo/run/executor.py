"""Where a generation's members are played: in this process (`local`) or on a Ray cluster (`ray`).

The executor is a runtime choice, not part of a run's config: a member's episodes (an agent's) or
sampling seed (a heuristic's) are bound to its index, its weights to (ES step, seed, sign, sigma), so the
same run played here or on workers stores the same rewards and ends at the same weights, and a run
started on one executor may be resumed on the other. The driver stays the only writer of the run store;
an executor only hands evaluations (and the heuristics its workers wrote) back.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from coevo.run.config import ConfigError
from coevo.workload import Evaluation, Member, Workload

if TYPE_CHECKING:
    from coevo.es.update_log import UpdateRecord
    from coevo.run.config import RunConfig
    from coevo.run.proposals import ProposalJob, ProposedMember

ExecutorName = Literal["local", "ray"]
EXECUTORS: tuple[ExecutorName, ...] = ("local", "ray")


class Executor(Protocol):
    """Plays one generation's members, or scores heuristics, and returns the evaluations in order."""

    def evaluate(
        self,
        workload: Workload,
        members: Sequence[Member],
        *,
        generation: int,
        traces: bool,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        """`workload` is the driver's view of generation `generation`; a remote executor rebuilds it, and
        moves its replicas to the members' weights with the ES records `history(since)` gives. Heuristics
        (the AHD workload) need no weights: a remote executor scores the code `workload` names for each."""
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

    def evaluate(
        self,
        workload: Workload,
        members: Sequence[Member],
        *,
        generation: int,
        traces: bool,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        return workload.evaluate(members, traces=traces)

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


def check_executor(name: str) -> None:
    """Fail in one line, before any model loads, when executor `name` cannot run here."""
    if name not in EXECUTORS:
        raise ConfigError(f"unknown executor {name!r}; choose one of: {', '.join(EXECUTORS)}")
    if name == "local":
        return
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("--executor ray needs the ray extra: pip install 'coevo[ray]'")


def open_executor(name: str, config: RunConfig, address: str | None = None) -> Executor:
    """The executor `name` for a run of `config` (`address`: an existing Ray cluster, else RAY_ADDRESS
    or a local one); opened before the run's store, so a cluster that cannot be joined leaves nothing."""
    check_executor(name)
    if name == "local":
        return LocalExecutor()
    from coevo.run.ray_executor import RayExecutor

    return RayExecutor(config, address)
