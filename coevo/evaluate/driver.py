"""A trusted driver process: the task's drivers run here, the candidate's function in its child.

The fork server forks a few of these (one per candidate evaluated at once) and each serves one
candidate after another; none ever runs candidate code, nor did any process it descends from.
For each candidate the parent hands it the channel of a sandboxed child (``child.py``) that has
its job, and this process runs the task's drivers (``Task.drive``): every call of the candidate's
function goes to the child as a message, and every answer that comes back is checked here,
against state the child cannot reach. Solutions go to the parent, which scores them itself.

Instances advance in lockstep: each step collects the pending call of every live driver of a
window (``Task.lockstep`` instances) and sends them in one message. The first instance runs
alone, so that a candidate too slow for the per-instance limit fails as soon as it would one
instance at a time. Every limit is judged here, on this process's clock, never on anything the
child says about time (it says nothing): the module-level limit from the hand-off to the child's
"loaded" message, each answer's time from the arrival of the message before it (or the request
leaving, whichever is later) to its own arrival, charged to the instance it answers, and the
per-candidate limit from the hand-off. The child sends each answer as soon as it has it, so the
driver always knows which instance it is waiting for and since when. The parent kills the child
once this process has judged it, and both should this one overrun too.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from coevo.evaluate.channel import (
    ChannelError,
    FrameReader,
    decode_solution,
    frame,
    write_all,
)
from coevo.evaluate.child import EXIT_SETUP_FAILED, ChildSetup, Prepared, isolate
from coevo.evaluate.guard import EXIT_VIOLATION
from coevo.evaluate.isolation import die_with_parent
from tasks.base import HEURISTIC, Call, InvalidSolution
from tasks.plain_data import encode_solution

MAX_CANDIDATE_BYTES = 256 << 20
"""Most bytes one candidate may send, whatever its frames."""
_FAILURE_KINDS = ("invalid", "error", "violation")


@dataclass(frozen=True)
class Assignment:
    """What the parent hands a driver with a child's channel."""

    instance_seconds: float
    candidate_seconds: float

    _FORMAT = struct.Struct("<dd")

    def encode(self) -> bytes:
        return self._FORMAT.pack(self.instance_seconds, self.candidate_seconds)

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        return cls(*cls._FORMAT.unpack(data))

    @classmethod
    def size(cls) -> int:
        return cls._FORMAT.size


def exit_reason(status: int | None, progress: str) -> str:
    """Why a candidate's process ended, from its wait status (None: unknown)."""
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
    """Serve candidates handed over on ``conn_fd`` until the parent closes it, then exit."""
    isolate(setup.stdio, conn_fd)
    die_with_parent()
    if prepared.guard is not None:
        prepared.guard.restore_classes()  # the fork server put the candidates' checked methods in place
    conn = socket.socket(fileno=conn_fd)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(conn, Assignment.size(), 1)
        except OSError:
            break
        if len(data) != Assignment.size() or len(fds) != 1:
            break  # the parent closed the channel (or the sandbox is shutting down)
        (child,) = fds
        out = bytearray()
        try:
            _Driver(Assignment.decode(data), prepared, child, lambda message: out.extend(frame(message))).run()
        except BaseException as error:  # noqa: BLE001 - the driver must always report
            out.extend(frame({"error": f"sandbox failure: {type(error).__name__}: {error}"}))
        finally:
            os.close(child)
        try:
            write_all(conn_fd, bytes(out))  # the whole verdict in one write: the parent wakes once
        except OSError:
            break
    os._exit(0)


def windows(count: int, size: int, first_alone: bool) -> Iterator[range]:
    """The instances in windows of ``size``, the first one alone if ``first_alone``."""
    start = 0
    if count and first_alone:
        yield range(1)
        start = 1
    for begin in range(start, count, size):
        yield range(begin, min(count, begin + size))


class _Stop(Exception):
    """The run ends with this message to the parent (a failure)."""

    def __init__(self, message: dict[str, Any]) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class _Built:
    """A driver's solution."""

    solution: Any


class _Candidate:
    """The driver's handle on a sandboxed child: its channel, and when each of its messages arrived."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.reader = FrameReader()
        self.messages: deque[tuple[dict[str, Any], float]] = deque()
        """Messages read but not yet judged, each with the moment (this process's clock) it was read."""
        self.received = 0
        self.closed = False
        """The child's end of the channel is closed: it has exited."""

    def send(self, request: dict[str, Any], deadline: float) -> None:
        """Write one request; give up at ``deadline`` or if the child is gone."""
        data = memoryview(frame(request))
        while data:
            try:
                data = data[os.write(self.fd, data) :]
            except BlockingIOError:
                _, writable, _ = select.select([], [self.fd], [], max(0.0, deadline - time.monotonic()))
                if not writable:
                    return
            except OSError:
                return

    def next_message(self, deadline: float) -> tuple[dict[str, Any], float] | None:
        """The child's next message and when it arrived, waiting until ``deadline`` at most; None
        if none came by then (or the child exited)."""
        while not self.messages and not self.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                continue  # woken early: the deadline is judged on the clock, above
            try:
                chunk = os.read(self.fd, 1 << 20)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            arrived = time.monotonic()
            self.closed = not chunk
            self.received += len(chunk)
            if self.received > MAX_CANDIDATE_BYTES:
                raise ChannelError(f"the child sent more than {MAX_CANDIDATE_BYTES >> 20} MiB")
            self.messages.extend((message, arrived) for message in self.reader.feed(chunk))
        return self.messages.popleft() if self.messages else None


class _Driver:
    """Runs one candidate over every instance, judging each answer and each deadline."""

    def __init__(self, limits: Assignment, prepared: Prepared, child_fd: int, send: Callable[[dict[str, Any]], None]) -> None:
        self.limits, self.send = limits, send
        self.task, self.instances = prepared.task, prepared.instances
        self.candidate = _Candidate(child_fd)
        self.started = time.monotonic()
        self.deadline = self.started + limits.candidate_seconds
        self.spent = [0.0] * len(self.instances)
        """Seconds charged per instance: from the message before each of its answers to that answer."""
        self.solutions: dict[int, Any] = {}
        self.reported = 0
        """Solutions sent to the parent: always a prefix, in instance order."""
        self.awaited: int | None = None
        """The instance whose answer is awaited (None: the module's "loaded", or nothing)."""
        self.last_arrival: float | None = None
        """When the child's last message arrived; None until its module has run."""

    def run(self) -> None:
        """Run the instances window after window; the first request goes out at once.

        Where the child runs the driver, each of its answers covers a whole instance, so each is
        timed on its own; in lockstep they advance together, so the first instance runs alone:
        a candidate too slow for the per-instance limit fails as soon as it would one instance at
        a time. The child reads its first request once its module has run, so loading costs no
        round trip of its own (its "loaded" message goes one way).
        """
        replay = self.task.child_runs_driver
        plan = list(windows(len(self.instances), max(1, self.task.lockstep), first_alone=not replay))
        try:
            for window in plan:
                if replay:
                    self._replay_window(window)
                else:
                    self._run_window(window)
            if not self.instances:
                self._ask({"run": []}, [])  # the module must still run
                self.send({"done": True})
        except _Stop as stop:
            self.send(stop.message)
        except ChannelError as error:
            self.send({**self._blame(), "error": str(error)})

    def _run_window(self, window: range) -> None:
        drivers = {index: self.task.drive(HEURISTIC, self.instances[index]) for index in window}
        try:
            pending = {}
            for index, driver in drivers.items():
                self._pend(pending, index, self._advance(index, driver, None))
            while pending:
                batch = sorted(pending.items())
                calls = [[index, encode_solution(call.args)] for index, call in batch]
                answers = [decode_solution(answer) for answer in self._ask({"calls": calls}, [index for index, _ in batch])]
                pending = {}
                for (index, _), answer in zip(batch, answers):
                    self._pend(pending, index, self._advance(index, drivers[index], answer))
        finally:
            for driver in drivers.values():
                driver.close()

    def _replay_window(self, window: range) -> None:
        """Ask for every answer of the window's instances at once, then replay each instance's
        driver on them (``Task.child_runs_driver``): every answer is checked as it is applied."""
        replies = self._ask({"run": list(window)}, list(window))
        for index, answers in zip(window, replies):
            if type(answers) is not list:
                raise _Stop({"index": index, "error": "the child sent answers that are not a list"})
            driver = self.task.drive(HEURISTIC, self.instances[index])
            try:
                step = self._advance(index, driver, None)
                for answer in answers:
                    if not isinstance(step, Call):
                        raise _Stop({"index": index, "error": "the child sent more answers than the instance asks for"})
                    step = self._advance(index, driver, decode_solution(answer))
                if isinstance(step, Call):
                    raise _Stop({"index": index, "error": "the child's answers ended before the instance was built"})
                self._solved(index, step.solution)
            finally:
                driver.close()

    def _pend(self, pending: dict[int, Call], index: int, step: Call | _Built) -> None:
        """Keep a driver's next call, or its solution when it has one."""
        if isinstance(step, Call):
            pending[index] = step
        else:
            self._solved(index, step.solution)

    def _advance(self, index: int, driver: Coroutine[Call, Any, Any], answer: Any) -> Call | _Built:
        """Resume one driver with its answer: its next call, or its solution."""
        try:
            call = driver.send(answer)
        except StopIteration as finished:
            return _Built(finished.value)
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

    def _ask(self, request: dict[str, Any], parts: list[int]) -> list[Any]:
        """Send one request (one part per instance of ``parts``) and return the encoded answers,
        one message per part, each timed and charged to its instance as it arrives.

        A candidate that stops reading its requests is then judged like one that stops answering.
        """
        sent_at = time.monotonic()
        loaded = self.last_arrival is not None
        self.candidate.send(request, self._deadline(parts[0], sent_at) if loaded else self._module_deadline())
        if not loaded:
            self._await_module()
        answers = []
        for index in parts:
            since = max(sent_at, self.last_arrival)
            self.awaited = index
            message, arrived = self._next_message(self._deadline(index, since))
            if message.keys() != {"answer"}:
                raise _Stop(self._failure(message, index))
            arrived = max(arrived, since)  # an answer sent ahead of its request starts no earlier clock
            self.spent[index] += arrived - since
            self.last_arrival = arrived
            if arrived >= self.deadline:
                raise _Stop({"index": index, "error": self._over_candidate_limit()})
            if self.spent[index] > self.limits.instance_seconds:
                raise _Stop({"index": index, "error": self._over_instance_limit()})
            answers.append(message["answer"])
        self.awaited = None
        return answers

    def _await_module(self) -> None:
        """Wait for the child's "loaded" (its module has run), and tell the parent."""
        message, arrived = self._next_message(self._module_deadline())
        if message != {"loaded": True}:
            raise _Stop(self._failure(message, None))
        if arrived >= self.deadline:
            raise _Stop({"error": self._over_candidate_limit()})
        if arrived - self.started > self.limits.instance_seconds:
            raise _Stop({"error": self._over_module_limit()})
        self.last_arrival = arrived
        self.send({"loaded": True})

    def _next_message(self, deadline: float) -> tuple[dict[str, Any], float]:
        """The child's next message and when it arrived; a run stopped at ``deadline``, or if the child ended."""
        received = self.candidate.next_message(deadline)
        if received is not None:
            return received
        if self.candidate.closed:
            raise _Stop({**self._blame(), **self._death()})
        if self.last_arrival is None and time.monotonic() < self.deadline:
            raise _Stop({"error": self._over_module_limit()})
        if time.monotonic() >= self.deadline:
            raise _Stop({**self._blame(), "error": self._over_candidate_limit()})
        raise _Stop({**self._blame(), "error": self._over_instance_limit()})

    def _module_deadline(self) -> float:
        return min(self.started + self.limits.instance_seconds, self.deadline)

    def _deadline(self, index: int, since: float) -> float:
        """When the answer for ``index`` awaited since ``since`` overruns a limit."""
        return min(since + self.limits.instance_seconds - self.spent[index], self.deadline)

    def _failure(self, message: dict[str, Any], index: int | None) -> dict[str, Any]:
        """The parent's message for a failure the candidate reported (or for a stray message)."""
        where = {} if index is None else {"index": index}
        kinds = [kind for kind in _FAILURE_KINDS if kind in message]
        if len(kinds) == 1 and message.keys() == {kinds[0]}:
            return {**where, kinds[0]: str(message[kinds[0]])[:500]}
        return {**where, "error": f"the candidate sent an unexpected message {sorted(message)[:5]}"}

    def _blame(self) -> dict[str, int]:
        return {} if self.awaited is None else {"index": self.awaited}

    def _death(self) -> dict[str, int]:
        """The child closed its channel without a reason: the parent, which learns how its process
        ended, gives it (with how many instances were solved)."""
        return {"died": self._solved_count()}

    def _solved_count(self) -> int:
        return len(self.solutions) + self.reported

    def _progress(self) -> str:
        return f"after {self._solved_count()} of {len(self.instances)} instances"

    def _over_module_limit(self) -> str:
        return f"timed out in the module's top-level code (per-instance limit {self.limits.instance_seconds:g} s)"

    def _over_instance_limit(self) -> str:
        return f"timed out (per-instance limit {self.limits.instance_seconds:g} s)"

    def _over_candidate_limit(self) -> str:
        return f"exceeded the per-candidate time limit of {self.limits.candidate_seconds:g} s {self._progress()}"
