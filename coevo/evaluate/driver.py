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
instance at a time. The limits are judged here, on this process's clock: per instance, the time
its calls took (the child says how long each took, clamped to the time the batch took; while a
call runs, the shared ``Progress`` page says which it is), and per candidate, the wall time
since the hand-off. The parent kills the child once this process has judged it, and both
should this one overrun too.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from coevo.evaluate.channel import (
    ChannelError,
    FrameReader,
    Progress,
    decode_solution,
    encode_solution,
    frame,
    write_all,
)
from coevo.evaluate.child import EXIT_SETUP_FAILED, ChildSetup, Prepared, isolate
from coevo.evaluate.guard import EXIT_VIOLATION
from coevo.evaluate.isolation import die_with_parent
from tasks.base import HEURISTIC, Call, InvalidSolution

MAX_CANDIDATE_BYTES = 256 << 20
"""Most bytes one candidate may send, whatever its frames."""
_FAILURE_KINDS = ("invalid", "error", "violation")


@dataclass(frozen=True)
class Assignment:
    """What the parent hands a driver with a child's channel and progress page."""

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
    conn = socket.socket(fileno=conn_fd)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(conn, Assignment.size(), 2)
        except OSError:
            break
        if len(data) != Assignment.size() or len(fds) != 2:
            break  # the parent closed the channel (or the sandbox is shutting down)
        child, progress = fds
        out = bytearray()
        try:
            _Driver(Assignment.decode(data), prepared, child, Progress(progress), lambda message: out.extend(frame(message))).run()
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
    """The driver's handle on a sandboxed child: its channel and its progress page."""

    def __init__(self, fd: int, progress: Progress) -> None:
        self.fd, self.progress = fd, progress
        os.set_blocking(fd, False)
        self.reader = FrameReader()
        self.messages: list[dict[str, Any]] = []
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

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        """The child's next message, waiting at most ``timeout``; None if none came (or it exited)."""
        if not self.messages and not self.closed:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
            if ready:
                try:
                    chunk = os.read(self.fd, 1 << 20)
                except (BlockingIOError, InterruptedError):
                    chunk = None
                except OSError:
                    chunk = b""
                if chunk is not None:
                    self.closed = not chunk
                    self.received += len(chunk)
                    if self.received > MAX_CANDIDATE_BYTES:
                        raise ChannelError(f"the child sent more than {MAX_CANDIDATE_BYTES >> 20} MiB")
                    self.messages += self.reader.feed(chunk)
        return self.messages.pop(0) if self.messages else None


class _Driver:
    """Runs one candidate over every instance, judging each answer and each deadline."""

    def __init__(
        self, limits: Assignment, prepared: Prepared, child_fd: int, progress: Progress, send: Callable[[dict[str, Any]], None]
    ) -> None:
        self.limits, self.send = limits, send
        self.task, self.instances = prepared.task, prepared.instances
        self.candidate = _Candidate(child_fd, progress)
        self.started = time.monotonic()
        self.deadline = self.started + limits.candidate_seconds
        self.spent = [0.0] * len(self.instances)
        """Seconds the candidate's function took per instance."""
        self.solutions: dict[int, Any] = {}
        self.reported = 0
        """Solutions sent to the parent: always a prefix, in instance order."""
        self.batch_number = 0
        self.in_flight: list[int] = []
        """The instances of the batch being answered."""
        self.sent_at = self.started
        self.loaded = False
        """The child's module has run (and the parent has been told)."""

    def run(self) -> None:
        """Run the instances window after window; the first request goes out at once.

        Where the child runs the driver, its instances run one after another there, so the
        progress page times each; in lockstep they advance together, so the first instance runs
        alone: a candidate too slow for the per-instance limit fails as soon as it would one
        instance at a time. The child reads its first request once its module has run (it marks
        that on its progress page), so loading costs no message of its own.
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

    def _module_ran(self) -> bool:
        """The child's module has run: it has started a request (or this process knows already)."""
        if not self.loaded and self.candidate.progress.read()[0] >= 1:
            self.loaded = True
            self.send({"loaded": True})
        return self.loaded

    def _run_window(self, window: range) -> None:
        drivers = {index: self.task.drive(HEURISTIC, self.instances[index]) for index in window}
        try:
            pending = {}
            for index, driver in drivers.items():
                self._pend(pending, index, self._advance(index, driver, None))
            while pending:
                if time.monotonic() >= self.deadline:
                    raise _Stop({"error": self._over_candidate_limit()})
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

    def _ask(self, request: dict[str, Any], in_flight: list[int]) -> list[Any]:
        """Send one request (one part per instance of ``in_flight``) and return the encoded
        answers, one per part, holding each part to its instance's deadline.

        A candidate that stops reading its requests is then judged like one that stops answering.
        """
        self._send_request(request, in_flight)
        return self._await_reply()

    def _send_request(self, request: dict[str, Any], in_flight: list[int]) -> None:
        self.batch_number += 1
        self.in_flight = in_flight
        self.sent_at = time.monotonic()
        self.candidate.send(request, self._deadline_of(*self._running_call(self.sent_at)))

    def _await_reply(self) -> list[Any]:
        while True:
            message = self.candidate.next_message(self._current_deadline() - time.monotonic())
            if message is not None:
                if self._module_ran() or message.keys() == {"answers", "seconds"}:
                    self._module_ran_now()
                    return self._answers(message)
                raise _Stop(self._failure(message, None))
            if self.candidate.closed:
                raise _Stop({**self._blame(), **self._death()})
            if time.monotonic() >= self._current_deadline():
                self._time_out()

    def _module_ran_now(self) -> None:
        if not self.loaded:
            self.loaded = True
            self.send({"loaded": True})

    def _current_deadline(self) -> float:
        if not self._module_ran():
            return min(self.started + self.limits.instance_seconds, self.deadline)
        if not self.in_flight:
            return self.deadline
        return self._deadline_of(*self._running_call(time.monotonic()))

    def _time_out(self) -> NoReturn:
        """Fail the run on the deadline that has passed."""
        now = time.monotonic()
        if not self._module_ran():
            if now >= self.deadline:
                raise _Stop({"error": self._over_candidate_limit()})
            limit = self.limits.instance_seconds
            raise _Stop({"error": f"timed out in the module's top-level code (per-instance limit {limit:g} s)"})
        if not self.in_flight:
            raise _Stop({"error": self._over_candidate_limit()})
        index, since = self._running_call(now)
        if now >= self.deadline:
            raise _Stop({"index": index, "error": self._over_candidate_limit()})
        if now >= self._deadline_of(index, since):
            raise _Stop({"index": index, "error": self._over_instance_limit()})

    def _deadline_of(self, index: int, since: float) -> float:
        """When the call of ``index`` running since ``since`` overruns a limit."""
        return min(since + self.limits.instance_seconds - self.spent[index], self.deadline)

    def _running_call(self, now: float) -> tuple[int, float]:
        """The instance whose call is running, and since when, by the candidate's progress page
        (the child records when it starts a request, and when each part of it ends).

        Once every part has ended the reply is owed, from the last part's end, on the last
        instance's allowance: a long reply is read in several chunks, and timing it from the
        request's start would charge the last instance with the whole request.
        """
        batch, answered, at = self.candidate.progress.read()
        if batch != self.batch_number or not 0 <= answered <= len(self.in_flight) or at != at:
            return self.in_flight[-1 if batch == self.batch_number and answered > 0 else 0], self.sent_at
        return self.in_flight[min(answered, len(self.in_flight) - 1)], min(max(at, self.sent_at), now)

    def _answers(self, message: dict[str, Any]) -> list[Any]:
        """The request's answers, after charging each instance the time its part took."""
        if message.keys() != {"answers", "seconds"}:
            raise _Stop(self._failure(message, self._running_call(time.monotonic())[0]))
        answers, seconds = message["answers"], message["seconds"]
        if type(answers) is not list or type(seconds) is not list or not len(answers) == len(seconds) == len(self.in_flight):
            raise ChannelError("the child sent a reply that does not match the request")
        if not all(type(second) in (int, float) for second in seconds):
            raise ChannelError("the child sent a reply without valid times")
        wall = time.monotonic() - self.sent_at
        charged = [min(max(float(second), 0.0), wall) for second in seconds]
        scale = wall / sum(charged) if sum(charged) > wall else 1.0
        for index, second in zip(self.in_flight, charged):
            self.spent[index] += second * scale
            if self.spent[index] > self.limits.instance_seconds:
                raise _Stop({"index": index, "error": self._over_instance_limit()})
        return answers

    def _failure(self, message: dict[str, Any], index: int | None) -> dict[str, Any]:
        """The parent's message for a failure the candidate reported (or for a stray message)."""
        kinds = [kind for kind in _FAILURE_KINDS if kind in message]
        if len(kinds) == 1 and message.keys() <= {kinds[0], "call"}:
            call = message.get("call")
            if type(call) is int and 0 <= call < len(self.in_flight):
                index = self.in_flight[call]
            where = {} if index is None else {"index": index}
            return {**where, kinds[0]: str(message[kinds[0]])[:500]}
        where = {} if index is None else {"index": index}
        return {**where, "error": f"the candidate sent an unexpected message {sorted(message)[:5]}"}

    def _blame(self) -> dict[str, int]:
        return {"index": self._running_call(time.monotonic())[0]} if self.in_flight and self._module_ran() else {}

    def _death(self) -> dict[str, int]:
        """The child closed its channel without a reason: the parent, which learns how its process
        ended, gives it (with how many instances were solved)."""
        return {"died": self._solved_count()}

    def _solved_count(self) -> int:
        return len(self.solutions) + self.reported

    def _progress(self) -> str:
        return f"after {self._solved_count()} of {len(self.instances)} instances"

    def _over_instance_limit(self) -> str:
        return f"timed out (per-instance limit {self.limits.instance_seconds:g} s)"

    def _over_candidate_limit(self) -> str:
        return f"exceeded the per-candidate time limit of {self.limits.candidate_seconds:g} s {self._progress()}"


