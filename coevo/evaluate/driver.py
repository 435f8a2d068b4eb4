"""The trusted driver process of one candidate: the task's drivers here, its function in a child.

The fork server forks this process ahead of need; it never runs candidate code, and neither
did any process it descends from. When the parent sends the job, it forks the sandboxed
candidate process (``child.py``) and runs the task's drivers (``Task.drive``): every call of the
candidate's function goes to that child as a message, and every answer that comes back is
checked here, against state the child cannot reach. Solutions go to the parent, which scores
them itself.

Instances advance in lockstep: each step collects the pending call of every live driver of a
window (``Task.lockstep`` instances) and sends them in one message. The first instance runs
alone, so that a candidate too slow for the per-instance limit fails as soon as it would one
instance at a time. The limits are judged here, on this process's clock: per instance, the time
its calls took (the child says how long each took, clamped to the time the batch took; while a
call runs, the shared ``Progress`` page says which it is), and per candidate, the wall time
since the job arrived. The parent kills both processes if this one overruns too.
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import struct
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from coevo import pyast
from coevo.evaluate.channel import (
    ChannelError,
    FrameReader,
    Progress,
    decode_solution,
    encode_solution,
    frame,
    read_exactly,
    write_all,
)
from coevo.evaluate.child import EXIT_SETUP_FAILED, CandidateJob, ChildSetup, Prepared, run_candidate
from coevo.evaluate.guard import EXIT_VIOLATION
from coevo.evaluate.isolation import die_with_parent
from tasks.base import HEURISTIC, Call, InvalidSolution

_JOB_HEADER = struct.Struct("<IdQddQ")
"""memory_mb, cpu_seconds, file_bytes, instance_seconds, candidate_seconds, length of the module."""
MAX_CANDIDATE_BYTES = 256 << 20
"""Most bytes a candidate may send its driver in all, whatever its frames."""
_FAILURE_KINDS = ("invalid", "error")


class JobLimits(Protocol):
    instance_seconds: float
    candidate_seconds: float
    memory_mb: int
    file_bytes: int


@dataclass(frozen=True)
class Job:
    """What the parent sends a driver: the candidate's compiled module and its limits."""

    module: bytes
    """The candidate's module code object, marshalled (the parent compiled it: running the
    compiler in a freshly forked process would copy far more pages than loading its output)."""
    memory_mb: int
    cpu_seconds: float
    file_bytes: int
    instance_seconds: float
    candidate_seconds: float

    @classmethod
    def compile(cls, source: str, limits: JobLimits) -> Job:
        """The job for ``source``, compiled here in the trusted parent; raises SyntaxError or ValueError."""
        module = marshal.dumps(pyast.compile_module(source, "<candidate>"))
        return cls(
            module, limits.memory_mb, limits.candidate_seconds, limits.file_bytes,
            limits.instance_seconds, limits.candidate_seconds,
        )  # fmt: skip

    def encode(self) -> bytes:
        header = _JOB_HEADER.pack(
            self.memory_mb, self.cpu_seconds, self.file_bytes, self.instance_seconds, self.candidate_seconds, len(self.module)
        )
        return header + self.module

    @classmethod
    def read(cls, fd: int) -> Job:
        *limits, length = _JOB_HEADER.unpack(read_exactly(fd, _JOB_HEADER.size))
        memory_mb, cpu_seconds, file_bytes, instance_seconds, candidate_seconds = limits
        return cls(read_exactly(fd, length), memory_mb, cpu_seconds, file_bytes, instance_seconds, candidate_seconds)


def exit_reason(status: int | None, progress: str) -> str:
    """Why a process of the sandbox ended, from its wait status (None: unknown)."""
    if status is None:
        return f"the fork server did not report how the candidate process ended {progress}"
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        cause = {
            signal.SIGXCPU: " (CPU-time limit)",
            signal.SIGKILL: " (CPU-time or memory limit)",
            signal.SIGXFSZ: " (file-size limit)",
        }.get(signum, "")
        return f"the candidate process was killed by {signal.Signals(signum).name}{cause} {progress}"
    code = os.WEXITSTATUS(status)
    if code == EXIT_VIOLATION:
        return f"the candidate broke the sandbox rules {progress}"
    if code == EXIT_SETUP_FAILED:
        return "the sandbox failed to set up the candidate process"
    return f"the candidate process exited with code {code} {progress}"


def run_driver(conn_fd: int, prepared: Prepared, setup: ChildSetup) -> NoReturn:
    """Wait for the job on ``conn_fd``, evaluate it with a fresh candidate process, report, exit."""
    send = lambda message: write_all(conn_fd, frame(message))  # noqa: E731
    exit_code = EXIT_SETUP_FAILED
    try:
        _isolate(conn_fd, setup.stdio)
        die_with_parent()
        job = Job.read(conn_fd)  # a driver may be forked ahead of need: it waits here for its job
        exit_code = 0
        driver = _Driver(job, prepared, setup, send)
        try:
            driver.run()
        finally:
            # The parent waits for this hang-up, not for each message; closing the channel here
            # signals it at once, before the candidate is killed and this process torn down.
            os.close(conn_fd)
            driver.candidate.kill()
    except BaseException as error:  # noqa: BLE001 - the driver must always report, then exit
        send({"error": f"sandbox failure: {type(error).__name__}: {error}"})
    finally:
        os._exit(exit_code)


def _isolate(conn_fd: int, stdio: int) -> None:
    """Own process group (the candidate's too), stdio on /dev/null, no other inherited descriptor."""
    os.setpgid(0, 0)
    for fd in (0, 1, 2):
        os.dup2(stdio, fd)
    os.closerange(3, conn_fd)
    os.closerange(conn_fd + 1, 1 << 16)


def windows(count: int, size: int) -> Iterator[range]:
    """The first instance alone, then the rest in windows of ``size``."""
    if count:
        yield range(1)
    for start in range(1, count, size):
        yield range(start, min(count, start + size))


class _Stop(Exception):
    """The run ends with this message to the parent (a failure)."""

    def __init__(self, message: dict[str, Any]) -> None:
        super().__init__(message)
        self.message = message


class _Candidate:
    """The driver's handle on its sandboxed candidate process."""

    def __init__(self, job: Job, prepared: Prepared, setup: ChildSetup) -> None:
        calls_read, self.calls = os.pipe()
        self.answers, answers_write = os.pipe()
        self.progress = Progress()
        candidate_job = CandidateJob(
            job.module, job.memory_mb, job.cpu_seconds, job.file_bytes, calls_read, answers_write, self.progress
        )
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.calls)
            os.close(self.answers)
            run_candidate(candidate_job, prepared, setup)
        os.close(calls_read)
        os.close(answers_write)
        os.set_blocking(self.calls, False)
        self.reader = FrameReader()
        self.messages: list[dict[str, Any]] = []
        self.received = 0
        self.closed = False
        """The candidate's end of the answers pipe is closed: it has exited."""
        self.status: int | None = None

    def send(self, batch: list[tuple[int, tuple[Any, ...]]], deadline: float) -> bool:
        """Write one batch of calls; False if the candidate stopped reading before ``deadline``."""
        data = memoryview(frame({"calls": [[index, encode_solution(args)] for index, args in batch]}))
        while data:
            try:
                data = data[os.write(self.calls, data) :]
            except BlockingIOError:
                _, writable, _ = select.select([], [self.calls], [], max(0.0, deadline - time.monotonic()))
                if not writable:
                    return False
            except BrokenPipeError:
                return False
        return True

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        """The candidate's next message, waiting at most ``timeout``; None if none came (or it exited)."""
        if not self.messages and not self.closed:
            ready, _, _ = select.select([self.answers], [], [], max(0.0, timeout))
            if ready:
                chunk = os.read(self.answers, 1 << 20)
                self.closed = not chunk
                self.received += len(chunk)
                if self.received > MAX_CANDIDATE_BYTES:
                    raise ChannelError(f"the candidate sent more than {MAX_CANDIDATE_BYTES >> 20} MiB")
                self.messages += self.reader.feed(chunk)
        return self.messages.pop(0) if self.messages else None

    def kill(self) -> None:
        """End the candidate, whatever it is doing; the fork server reaps it (it adopts orphans)."""
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)

    def ended(self) -> int | None:
        """The wait status of a candidate that closed its end (it is exiting): waits for its end."""
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        return self.status


class _Driver:
    """Runs one candidate over every instance, judging each answer and each deadline."""

    def __init__(self, job: Job, prepared: Prepared, setup: ChildSetup, send: Any) -> None:
        self.job, self.prepared, self.setup, self.send = job, prepared, setup, send
        self.task, self.instances = prepared.task, prepared.instances
        self.started = time.monotonic()
        self.deadline = self.started + job.candidate_seconds
        self.spent = [0.0] * len(self.instances)
        """Seconds the candidate's function took per instance."""
        self.solutions: dict[int, Any] = {}
        self.reported = 0
        """Solutions sent to the parent: always a prefix, in instance order."""
        self.batch_number = 0
        self.in_flight: list[int] = []
        """The instances of the batch being answered."""
        self.sent_at = self.started
        self.candidate = _Candidate(job, prepared, setup)

    def run(self) -> None:
        try:
            self._load()
            self.send({"loaded": True})
            for window in windows(len(self.instances), max(1, self.task.lockstep)):
                self._run_window(window)
            if not self.instances:
                self.send({"done": True})
        except _Stop as stop:
            self.send(stop.message)
        except ChannelError as error:
            self.send({**self._blame(), "error": str(error)})

    def _load(self) -> None:
        """Wait for the module to run; its top-level code is held to the per-instance limit."""
        limit = self.job.instance_seconds
        deadline = min(self.started + limit, self.deadline)
        while True:
            message = self.candidate.next_message(deadline - time.monotonic())
            if message == {"loaded": True}:
                return
            if message is not None:
                raise _Stop(self._failure(message, None))
            if self.candidate.closed:
                raise _Stop({"error": self._death()})
            if time.monotonic() >= deadline:
                if deadline < self.started + limit:
                    raise _Stop({"error": self._over_candidate_limit()})
                raise _Stop({"error": f"timed out in the module's top-level code (per-instance limit {limit:g} s)"})

    def _run_window(self, window: range) -> None:
        drivers = {index: self.task.drive(HEURISTIC, self.instances[index]) for index in window}
        try:
            pending = {index: self._advance(index, driver, None) for index, driver in drivers.items()}
            pending = {index: call for index, call in pending.items() if call is not None}
            while pending:
                if time.monotonic() >= self.deadline:
                    raise _Stop({"error": self._over_candidate_limit()})
                batch = sorted(pending.items())
                answers = self._ask([(index, call.args) for index, call in batch])
                pending = {}
                for (index, _), answer in zip(batch, answers):
                    call = self._advance(index, drivers[index], answer)
                    if call is not None:
                        pending[index] = call
        finally:
            for driver in drivers.values():
                driver.close()

    def _advance(self, index: int, driver: Coroutine[Call, Any, Any], answer: Any) -> Call | None:
        """Resume one driver with its answer: its next call, or None when it has its solution."""
        try:
            call = driver.send(answer)
        except StopIteration as finished:
            self._solved(index, finished.value)
            return None
        except InvalidSolution as invalid:
            raise _Stop({"index": index, "invalid": str(invalid)}) from None
        except Exception as error:  # noqa: BLE001 - an answer that trips the driver is the candidate's
            raise _Stop({"index": index, "error": f"the answer broke the driver: {type(error).__name__}: {error}"[:500]}) from None
        if type(call) is not Call:
            raise TypeError(f"{type(self.task).__name__}.drive awaited {type(call).__name__}, not a heuristic call")
        return call

    def _solved(self, index: int, solution: Any) -> None:
        """Keep the solution, and send every solution whose predecessors are all sent."""
        try:
            self.solutions[index] = encode_solution(solution)
        except InvalidSolution as invalid:
            raise _Stop({"index": index, "invalid": str(invalid)}) from None
        while self.reported in self.solutions:
            message = {"index": self.reported, "solution": self.solutions.pop(self.reported), "at": time.monotonic()}
            self.reported += 1
            if self.reported == len(self.instances):
                message["done"] = True  # in the same frame: one write and one read fewer per candidate
            self.send(message)

    def _ask(self, batch: list[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        """Send one batch of calls and return the answers, holding each call to its deadline.

        A candidate that stops reading its calls is then judged like one that stops answering.
        """
        self.batch_number += 1
        self.in_flight = [index for index, _ in batch]
        self.sent_at = time.monotonic()
        self.candidate.send(batch, self._deadline_of(*self._running_call(self.sent_at)))
        while True:
            message = self.candidate.next_message(self._deadline_of(*self._running_call(time.monotonic())) - time.monotonic())
            if message is not None:
                return self._answers(message, batch)
            if self.candidate.closed:
                raise _Stop({**self._blame(), "error": self._death()})
            now = time.monotonic()
            index, since = self._running_call(now)
            if now >= self.deadline:
                raise _Stop({"index": index, "error": self._over_candidate_limit()})
            if now >= self._deadline_of(index, since):
                raise _Stop({"index": index, "error": self._over_instance_limit()})

    def _deadline_of(self, index: int, since: float) -> float:
        """When the call of ``index`` running since ``since`` overruns a limit."""
        return min(since + self.job.instance_seconds - self.spent[index], self.deadline)

    def _running_call(self, now: float) -> tuple[int, float]:
        """The instance whose call is running, and since when, by the candidate's progress page."""
        batch, answered, at = self.candidate.progress.read()
        if batch != self.batch_number or not 0 < answered < len(self.in_flight) or at != at:
            return self.in_flight[-1 if batch == self.batch_number and answered > 0 else 0], self.sent_at
        return self.in_flight[answered], min(max(at, self.sent_at), now)

    def _answers(self, message: dict[str, Any], batch: list[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        """The batch's decoded answers, after charging each instance the time its call took."""
        if message.keys() != {"answers", "seconds"}:
            raise _Stop(self._failure(message, self._running_call(time.monotonic())[0]))
        answers, seconds = message["answers"], message["seconds"]
        if type(answers) is not list or type(seconds) is not list or not len(answers) == len(seconds) == len(batch):
            raise ChannelError("the candidate sent a reply that does not match its batch of calls")
        if not all(type(second) in (int, float) for second in seconds):
            raise ChannelError("the candidate sent a reply without valid times")
        wall = time.monotonic() - self.sent_at
        charged = [min(max(float(second), 0.0), wall) for second in seconds]
        scale = wall / sum(charged) if sum(charged) > wall else 1.0
        for (index, _), second in zip(batch, charged):
            self.spent[index] += second * scale
            if self.spent[index] > self.job.instance_seconds:
                raise _Stop({"index": index, "error": self._over_instance_limit()})
        return [decode_solution(answer) for answer in answers]

    def _failure(self, message: dict[str, Any], index: int | None) -> dict[str, Any]:
        """The parent's message for a failure the candidate reported (or for a stray message)."""
        kinds = [kind for kind in (*_FAILURE_KINDS, "violation") if kind in message]
        if len(kinds) == 1 and message.keys() <= {kinds[0], "call"}:
            call = message.get("call")
            if type(call) is int and 0 <= call < len(self.in_flight):
                index = self.in_flight[call]
            where = {} if index is None else {"index": index}
            return {**where, kinds[0]: str(message[kinds[0]])[:500]}
        where = {} if index is None else {"index": index}
        return {**where, "error": f"the candidate sent an unexpected message {sorted(message)[:5]}"}

    def _blame(self) -> dict[str, int]:
        return {"index": self._running_call(time.monotonic())[0]} if self.in_flight else {}

    def _death(self) -> str:
        return exit_reason(self.candidate.ended(), self._progress())

    def _progress(self) -> str:
        return f"after {len(self.solutions) + self.reported} of {len(self.instances)} instances"

    def _over_instance_limit(self) -> str:
        return f"timed out (per-instance limit {self.job.instance_seconds:g} s)"

    def _over_candidate_limit(self) -> str:
        return f"exceeded the per-candidate time limit of {self.job.candidate_seconds:g} s {self._progress()}"


