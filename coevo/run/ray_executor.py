"""The Ray executor: a generation's members played by worker actors, each a `MemberReplica`
(`coevo.run.member_replica`) holding the model; this module only schedules.

Seed-only sync, as OpenAI-ES does it: the driver never ships weights. A worker keeps the base model and
replays the run's ES history (`coevo.es.update_log`) into it; a member's job is its index, its weights
(ES step, seed, sign, sigma) and the history lines this worker has not applied yet, a few hundred bytes
whatever the model's size. An AHD ES member's job also carries its request (operator and parents' text)
and its member-bound sampling seed: the worker writes the heuristic under the member's perturbation and
scores it in its own sandbox, and hands back the answer and its verdict for the driver to store. A
heuristic written without a perturbation is scored on a worker too: its job is the code the driver's
workload stands it for, and only the verdict comes back. Jobs
are handed out as workers come free (`ray.wait`), so a straggler holds up only its own member. A worker
that dies mid-job is restarted by Ray and its member is queued again; episodes and sampling seeds are
bound to the member's index, so the replayed member scores what it would have scored. Only the driver
writes the run store.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from coevo.es.update_log import UpdateRecord
from coevo.run.config import ConfigError, RunConfig
from coevo.run.member_replica import MemberReplica, StaleReplica
from coevo.run.proposals import ProposalJob, ProposedMember
from coevo.workload import EpisodeWorkload, Evaluation, HeuristicWorkload, Member

MAX_ATTEMPTS = 5
"""Times one member is handed out before the generation fails (each lost worker costs one)."""


def reachable(address: str | None, seconds: float = 5.0) -> None:
    """Fail in one line on a HOST:PORT nobody listens on; Ray itself retries such an address for minutes."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # no address (a local instance), "auto", or a client URL: Ray resolves those
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as error:
        raise ConfigError(f"cannot reach the Ray cluster at {address}: {error}") from None


_TOKEN_AUTH_NOTICE = "Token authentication is enabled for this Ray cluster."
"""The start of the warning Ray logs on every ray.init that leaves its default, token authentication, on."""


class _DropTokenAuthNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_TOKEN_AUTH_NOTICE)


@contextmanager
def _without_token_auth_notice() -> Iterator[None]:
    """Within: Ray does not announce that it kept its default, token authentication, on. Its other
    warnings (a cluster without authentication among them) still show."""
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    notice = _DropTokenAuthNotice()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


class RayExecutor:
    """Members on `workers` Ray actors (default: one per CPU of the cluster), scheduled as they come free."""

    extra = ("ray", "ray")

    @classmethod
    def from_config(cls, config: RunConfig, address: str | None = None) -> RayExecutor:
        """Workers on the cluster at `address`, else RAY_ADDRESS, else a local instance."""
        return cls(config, address)

    def __init__(
        self,
        config: RunConfig,
        address: str | None = None,
        workers: int | None = None,
    ) -> None:
        import ray

        if not ray.is_initialized():
            reachable(address or os.environ.get("RAY_ADDRESS"))
            try:
                with _without_token_auth_notice():
                    if address or os.environ.get("RAY_ADDRESS"):
                        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
                    else:
                        ray.init(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
            except (ConnectionError, ValueError, RuntimeError) as error:
                where = address or os.environ.get("RAY_ADDRESS") or "a local instance"
                raise ConfigError(f"cannot start or join the Ray cluster at {where}: {error}") from None
        self._ray = ray
        count = workers or max(int(ray.cluster_resources().get("CPU", 1)), 1)
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(MemberReplica)
        data = config.model_dump(mode="json")
        self.actors = [actor.remote(data) for _ in range(count)]
        self._applied = [0] * count
        """ES updates each worker is believed to hold: the history lines it is sent start there."""
        self.sent_bytes = 0
        """Pickled size of every job handed out so far (what seed-only sync costs)."""
        self.finished = [0] * count
        """Jobs each worker has handed back (how evenly `ray.wait` spread them)."""

    def play(
        self,
        workload: EpisodeWorkload,
        members: Sequence[Member],
        *,
        generation: int,
        traces: bool,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        def submit(actor: Any, lines: tuple[str, ...], index: int) -> Any:
            return self._send(actor.play, lines, generation, index, members[index], traces)

        steps = [0 if member.weights is None else member.weights.step for member in members]
        return self._scheduled(steps, submit, generation, history)

    def propose(
        self,
        jobs: Sequence[ProposalJob],
        *,
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[ProposedMember]:
        def submit(actor: Any, lines: tuple[str, ...], index: int) -> Any:
            return self._send(actor.propose, lines, jobs[index])

        return self._scheduled([job.weights.step for job in jobs], submit, generation, history)

    def score(
        self,
        workload: HeuristicWorkload,
        members: Sequence[Member],
        *,
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Evaluation]:
        """Each distinct heuristic scored once, by the sandbox of the next free worker; verdicts in order."""
        codes = workload.codes(members)
        unique = list(dict.fromkeys(codes))

        def submit(actor: Any, lines: tuple[str, ...], index: int) -> Any:
            return self._send(actor.score, unique[index])

        verdicts = dict(zip(unique, self._scheduled([None] * len(unique), submit, generation, history), strict=True))
        return [verdicts[code] for code in codes]

    def _scheduled(
        self,
        steps: Sequence[int | None],
        submit: Callable[[Any, tuple[str, ...], int], Any],
        generation: int,
        history: Callable[[int], list[UpdateRecord]],
    ) -> list[Any]:
        """Hand member i (at ES step `steps[i]`; None: a job no weights decide) to the next free worker with
        `submit(actor, lines, i)`, queue it again when its worker died or was stale, and return the results
        in member order."""
        from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

        ray = self._ray
        queue = deque(range(len(steps)))
        attempts = [0] * len(steps)
        idle = deque(range(len(self.actors)))
        running: dict[Any, tuple[int, int]] = {}
        results: dict[int, Any] = {}
        while queue or running:
            while queue and idle:
                worker, index = idle.popleft(), queue.popleft()
                attempts[index] += 1
                if attempts[index] > MAX_ATTEMPTS:
                    raise RuntimeError(f"member {index} of generation {generation} failed on {MAX_ATTEMPTS} workers")
                held = self._applied[worker]
                lines = () if steps[index] is None else tuple(record.to_json() for record in history(held))
                running[submit(self.actors[worker], lines, index)] = (worker, index)
            (ref,), _ = ray.wait(list(running), num_returns=1)
            worker, index = running.pop(ref)
            idle.append(worker)
            try:
                results[index] = ray.get(ref)
                self.finished[worker] += 1
                if steps[index] is not None:
                    self._applied[worker] = steps[index]
            except (RayActorError, WorkerCrashedError):
                self._requeue(queue, worker, index, applied=0)
            except RayTaskError as error:
                if not isinstance(error.cause, StaleReplica):
                    raise error.as_instanceof_cause() from None
                self._requeue(queue, worker, index, applied=error.cause.step)
        return [results[index] for index in range(len(steps))]

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []

    def _send(self, method: Any, *job: Any) -> Any:
        """`method.remote(*job)`, counting the job's pickled size."""
        self.sent_bytes += len(pickle.dumps(job))
        return method.remote(*job)

    def _requeue(self, queue: deque[int], worker: int, index: int, applied: int) -> None:
        self._applied[worker] = applied
        queue.appendleft(index)
