"""The parent's side of the sandbox: hand a candidate to the fork server and collect its solutions.

The parent never runs candidate code. The warm fork server (``zygote.py``) holds the instances
and forks a fresh child per candidate, in batches ahead of need, and a few trusted driver
processes (one per candidate in flight), each serving candidate after candidate. The parent
sends the job to one waiting child, hands the child's channel to an idle driver, which runs the
task's drivers against it and judges the per-instance and per-candidate limits (``driver.py``),
reads the driver's verdict, and kills the child's whole process group with SIGKILL; should the
driver itself overrun the candidate's time, it kills both. Thread-safe: one ``Sandbox`` serves
many concurrent ``run`` calls.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Self

from coevo import pyast
from coevo.evaluate.channel import MAX_FORK_BATCH, STATUS_RECORD, ChannelError, FrameReader, decode_solution
from coevo.evaluate.child import Job
from coevo.evaluate.driver import MAX_CANDIDATE_BYTES, Assignment, exit_reason
from coevo.evaluate.isolation import inherited_environment
from coevo.plugins import spec_of
from tasks.base import Instance, Task, definition_hash

_ZYGOTE_START_SECONDS = 60.0
_REAP_GRACE_SECONDS = 5.0
_DEADLINE_GRACE_SECONDS = 0.5
"""How long past the candidate's deadline the parent waits for the driver's own verdict (which
names the instance) before it kills both processes itself."""
_MIN_BATCH = 16
"""Children forked per batch at the least: the fork server's own page copies after a fork are shared
by the whole batch, while each waiting spare holds its copied pages and page tables (the measured
trade-off is in experiments/bench/RESULTS.md, Sandbox)."""
_FORK_SERVER_ENV = {
    **dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"),  # one core per candidate
    # Resolve every shared-library symbol once in the fork server, not lazily in each child
    # (a lazy binding writes the symbol table: one more page copied per child).
    "LD_BIND_NOW": "1",
}


log = logging.getLogger(__name__)
_WARNED_LAYERS: set[str] = set()


SKIPPABLE_LAYERS = frozenset({"filesystem", "seccomp", "own_uids", "pids"})
_SOLUTION_KEYS = (frozenset({"index", "solution", "at"}), frozenset({"index", "solution", "at", "done"}))
_FAILURE_KEYS = frozenset({"invalid", "error", "violation", "died"})


class SandboxError(Exception):
    """The sandbox itself (not the candidate) failed, e.g. the fork server died."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one candidate run."""

    instance_seconds: float = 10.0
    candidate_seconds: float = 60.0
    memory_mb: int = 1024
    file_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        seconds = (self.instance_seconds, self.candidate_seconds)
        if not all(math.isfinite(limit) for limit in seconds):
            raise ValueError(f"time limits must be finite, got {self}")
        if min(seconds) <= 0 or self.memory_mb <= 0:
            raise ValueError(f"limits must be positive, got {self}")


@dataclass(frozen=True)
class InstancePayload:
    """A split's instances pickled once, for the fork server that every child inherits them from."""

    count: int
    data: bytes

    @classmethod
    def of(cls, instances: list[Instance]) -> InstancePayload:
        return cls(len(instances), pickle.dumps(instances, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True)
class SandboxResult:
    """What came back: a solution per completed instance, or why the run stopped."""

    solutions: tuple[Any, ...]
    failure: str | None
    failed_index: int | None
    """The instance being built when the run failed; None for failures before the first one."""


class Sandbox:
    """A fork server for one task and one instance set, started lazily and shut down by ``close``.

    Children are forked in batches and kept ready ahead of need (set up and waiting for their
    job), so a candidate starts with a single hand-off instead of waiting for a fork, and the
    fork server's own copy-on-write faults are paid once per batch rather than once per child.
    ``parallel`` is how many ``run`` calls may be in flight at once; a batch covers them all.
    """

    def __init__(
        self,
        task: Task,
        payload: InstancePayload,
        parallel: int = 1,
        python_guards: bool = True,
        skipped_layers: frozenset[str] = frozenset(),
    ) -> None:
        """``python_guards=False`` and ``skipped_layers`` (of ``SKIPPABLE_LAYERS``) weaken the
        sandbox: the first to test that the kernel layers hold alone, the second to measure them."""
        if not skipped_layers <= SKIPPABLE_LAYERS:
            raise ValueError(f"only {sorted(SKIPPABLE_LAYERS)} can be left out, got {sorted(skipped_layers)}")
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {parallel}")
        self._task_ref = spec_of(type(task))
        self._task_package = type(task).__module__.partition(".")[0]
        self._definition = definition_hash(type(task))
        self._payload = payload
        self._batch = min(MAX_FORK_BATCH, max(_MIN_BATCH, parallel))
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._spares: collections.deque[_Child] = collections.deque()
        self._drivers: list[_Child] = []
        """Every driver process of the running fork server; ``_idle`` holds those without a candidate."""
        self._idle: collections.deque[_Child] = collections.deque()
        self._lock = threading.Lock()
        self._python_guards = python_guards
        self._skipped_layers = skipped_layers
        self.layers: dict[str, bool | str] = {}
        """The kernel layers the running fork server holds: True, False, or why not (its greeting)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def server_pid(self) -> int | None:
        """The fork server's pid (every candidate is its child), None before the first run."""
        return self._process.pid if self._process else None

    def spare_pids(self) -> set[int]:
        """The fork server's children that run no candidate: children forked ahead and waiting for
        a job (no code of theirs ran), and the trusted driver processes."""
        with self._lock:
            for process in (*self._spares, *self._drivers):
                if process.pid is None:
                    process.read_status(_REAP_GRACE_SECONDS)
            return {process.pid for process in (*self._spares, *self._drivers) if process.pid is not None}

    def close(self) -> None:
        """Stop the fork server; it kills any candidate still running."""
        with self._lock:
            self._discard_drivers()
            while self._spares:
                self._spares.popleft().close()  # the spare reads EOF instead of a job, and exits
            if self._control is not None:
                self._control.close()
                self._control = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=_REAP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
                self._process = None

    def run(self, code: str, limits: Limits) -> SandboxResult:
        """Run the candidate over the instances in a fresh child, under ``limits``."""
        try:
            job = Job.compile(code, limits.memory_mb, limits.candidate_seconds, limits.file_bytes)
        except (SyntaxError, ValueError) as error:
            return SandboxResult((), pyast.unparsable_reason(error), None)
        with self._lock:
            child, driver = self._next_pair()
        healthy = False
        try:
            supervisor = _Supervisor(driver.conn, child, self._payload.count, limits, time.monotonic())
            outcome = supervisor.run(job.encode(), driver)
            healthy = supervisor.driver_done
            return outcome
        finally:
            child.close()
            with self._lock:
                if healthy and driver in self._drivers:
                    self._idle.append(driver)
                elif driver in self._drivers:
                    self._drivers.remove(driver)
                    driver.kill()
                    driver.close()

    def _next_pair(self) -> tuple[_Child, _Child]:
        """A forked child waiting for its job and an idle driver; a dead fork server is replaced, once."""
        try:
            return self._pair()
        except SandboxError:
            self._process.kill()  # its control socket is broken: replace it
            self._discard_server()
            return self._pair()

    def _pair(self) -> tuple[_Child, _Child]:
        child = self._spare()
        try:
            return child, self._idle_driver()
        except SandboxError:
            child.close()
            raise

    def _idle_driver(self) -> _Child:
        if not self._idle:
            (driver,) = _Child.fork_many(self._started_control(), 1, b"drive")
            self._drivers.append(driver)
            return driver
        return self._idle.popleft()

    def _discard_drivers(self) -> None:
        """Close every driver's channel: each reads EOF and exits (one with a candidate, after it)."""
        for driver in self._drivers:
            driver.close()
        self._drivers.clear()
        self._idle.clear()

    def _spare(self) -> _Child:
        control = self._started_control()
        if len(self._spares) < self._batch:  # keep at least a batch forked ahead
            self._spares.extend(_Child.fork_many(control, self._batch))
        return self._spares.popleft()

    def _started_control(self) -> socket.socket:
        """The control socket of a live fork server, starting one (again, if the last one died)."""
        if self._process is not None and self._process.poll() is not None:
            self._discard_server()  # its in-flight candidates see their channel close (see _exit_reason)
        if self._control is None:
            self._control = self._start_server()
        return self._control

    def _discard_server(self) -> None:
        self._discard_drivers()
        while self._spares:
            self._spares.popleft().close()
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            self._process.wait()
            self._process = None

    def _start_server(self) -> socket.socket:
        parent_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        instances_fd = _in_memory_file(self._payload.data)
        guards = "on" if self._python_guards else "off"
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "coevo.evaluate.relocate", str(server_end.fileno()), str(instances_fd)]
                + [self._task_ref, self._definition, guards, ",".join(sorted(self._skipped_layers)) or "-"],
                pass_fds=[server_end.fileno(), instances_fd],
                env=_fork_server_environment(self._task_package),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            server_end.close()
            os.close(instances_fd)
        parent_end.settimeout(_ZYGOTE_START_SECONDS)
        try:
            greeting = parent_end.recv(4096)
        except OSError as error:
            parent_end.close()
            raise SandboxError(f"the fork server did not start: {error}") from None
        if not greeting.startswith(b"ready"):
            parent_end.close()
            raise SandboxError(f"the fork server failed to start (exit code {self._process.poll()})")
        parent_end.settimeout(None)
        self.layers = json.loads(greeting[len(b"ready") :])
        _warn_missing_layers({name: held for name, held in self.layers.items() if name not in self._skipped_layers})
        return parent_end


def _fork_server_environment(task_package: str) -> dict[str, str]:
    """The fork server's environment: what Python and the numeric libraries need, nothing else.

    The parent's own variables (keys, tokens, paths) never reach the fork server, and the fork
    server clears even these before any child starts. Its import path is this process's, and
    the directories coevo and the task's package were imported from: the fork server runs
    without ``site`` (``relocate``), so an editable install's import hook does not find them.
    """
    roots = [_import_root(name) for name in ("coevo", task_package)]
    path = os.pathsep.join(dict.fromkeys(p for p in (*sys.path, *roots) if p))
    return {**inherited_environment(os.environ), **_FORK_SERVER_ENV, "PYTHONPATH": path}


def _import_root(name: str) -> str:
    """The directory of the import path that top-level module ``name`` (imported) was found in."""
    module = sys.modules[name]
    location = list(module.__path__)[0] if hasattr(module, "__path__") else module.__file__
    return os.path.dirname(os.path.abspath(location))


def _warn_missing_layers(layers: dict[str, bool | str]) -> None:
    """Say once per process which kernel layer this machine could not provide, and why."""
    for name, held in layers.items():
        if held is not True and name not in _WARNED_LAYERS:
            _WARNED_LAYERS.add(name)
            detail = f": {held}" if isinstance(held, str) else ""
            log.warning("sandbox: the kernel layer %r is not available on this machine%s", name, detail)


def _in_memory_file(data: bytes) -> int:
    """A memfd holding ``data``, positioned at its start for the process that inherits it.

    The instances reach the fork server this way: writing them cannot block on a fork server
    that is still importing (as a pipe would), and it reads them once, at its own pace.
    """
    fd = os.memfd_create("coevo-instances")
    with open(fd, "wb", closefd=False) as file:
        file.write(data)
    os.lseek(fd, 0, os.SEEK_SET)  # the offset is shared with the inheriting process
    return fd


class _Child:
    """The parent's handles on one forked child (or driver): its channel and the fork server's records."""

    def __init__(self, conn: socket.socket, status_read: int) -> None:
        self.conn, self.status_read = conn, status_read
        self.pid: int | None = None
        self.exit_status: int | None = None
        self.server_gone = False
        """The fork server closed this child's status pipe without reporting its exit: it died."""

    @classmethod
    def fork_many(cls, control: socket.socket, count: int, kind: bytes = b"fork") -> list[_Child]:
        """Ask the fork server for ``count`` children (``b"fork"``) or drivers (``b"drive"``);
        returns at once (they are forked over there)."""
        children, child_ends = [], []
        for _ in range(count):
            conn, child_end = socket.socketpair()
            status_read, status_write = os.pipe()
            child_ends += [child_end.detach(), status_write]
            children.append(cls(conn, status_read))
        try:
            socket.send_fds(control, [kind], child_ends)
        except OSError as error:
            for child in children:
                child.close()
            raise SandboxError(f"the fork server is gone: {error}") from None
        finally:
            for fd in child_ends:
                os.close(fd)
        return children

    def read_status(self, timeout: float) -> None:
        """Read the fork server's next record (the pid, then the exit status), if due in time."""
        poller = select.poll()  # not select(): the parent may hold fd numbers past FD_SETSIZE
        poller.register(self.status_read, select.POLLIN)
        if not poller.poll(max(timeout, 0.0) * 1000):
            return
        record = os.read(self.status_read, STATUS_RECORD.size)
        if not record:
            self.server_gone = True
        elif len(record) == STATUS_RECORD.size:
            kind, value = STATUS_RECORD.unpack(record)
            if kind == b"P":
                self.pid = value
            else:
                self.exit_status = value

    def kill(self) -> None:
        """SIGKILL the process and its group (a child whose run ended, or a driver that overran)."""
        if self.pid is None:
            self.read_status(_REAP_GRACE_SECONDS)  # the pid: written right after the fork
        if self.pid is not None:
            for kill in (os.killpg, os.kill):
                try:
                    kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def close(self) -> None:
        self.conn.close()
        os.close(self.status_read)


class _Supervisor:
    """Feeds one child its job, hands it to a driver, and reads the driver's verdict.

    The driver judges the limits itself; this is the backstop should it overrun (its own work,
    such as an ACO colony, counts towards the candidate's time). The child's pid and exit status
    come from the fork server through the status pipe; they are read only when needed (to kill it,
    or to explain why it died). The driver writes its whole verdict at once, so a quick candidate
    costs this thread a single wake-up.
    """

    def __init__(self, channel: socket.socket, child: _Child, count: int, limits: Limits, started: float) -> None:
        """``channel`` is the driver's (the verdict is read there); ``child`` is the candidate's process."""
        self.channel, self.child, self.count, self.limits = channel, child, count, limits
        self.candidate_deadline = started + limits.candidate_seconds + _DEADLINE_GRACE_SECONDS
        self.reader = FrameReader()
        self.solutions: list[Any] = []
        self.failure: str | None = None
        self.failed_index: int | None = None
        self.done = False
        self.loaded = False
        """The candidate's module ran: later failures belong to an instance."""
        self.child_closed = False
        """The driver's end of the channel is closed: it has exited."""
        self.received = 0
        """Bytes read from the driver so far (capped by MAX_CANDIDATE_BYTES)."""
        self.driver_done = False
        """The driver sent its whole verdict: it is free for another candidate."""
        self.died: tuple[int, int | None] | None = None
        """The driver saw the child end without a reason: (instances solved, the instance running)."""

    def run(self, job: bytes, driver: _Child | None = None) -> SandboxResult:
        """Send ``job`` to the child, hand the child to ``driver`` (None: a stand-in is already
        writing to ``channel``), and return the verdict."""
        try:
            if job:
                self._send_job(job)
            if driver is not None:
                assignment = Assignment(self.limits.instance_seconds, self.limits.candidate_seconds)
                socket.send_fds(driver.conn, [assignment.encode()], [self.child.conn.fileno()])
            self.channel.setblocking(False)
            self._watch()
        except ChannelError as error:
            self._fail(str(error))
        except ConnectionError:
            pass  # the driver's end vanished with its process: said below
        except Exception as error:  # noqa: BLE001 - whatever arrives, the verdict is ours
            self._fail(f"the child sent a malformed message: {type(error).__name__}: {str(error)[:200]}")
        finally:
            self._kill_and_reap()
        if self.failure is None and self.died is not None:
            solved, index = self.died
            self._fail(self._exit_reason(f"after {solved} of {self.count} instances"), index)
        if self.failure is None and not self.done:
            self._fail(self._exit_reason(f"after {len(self.solutions)} of {self.count} instances"))
        return SandboxResult(tuple(self.solutions), self.failure, self.failed_index)

    def _fail(self, reason: str, index: int | None = None) -> None:
        """Fail the run; ``index`` names the instance (by default the first without a solution)."""
        if self.failure is None:
            self.failure = reason
            if index is not None:
                self.failed_index = index
            elif self.loaded and len(self.solutions) < self.count:
                self.failed_index = len(self.solutions)

    def _send_job(self, job: bytes) -> None:
        conn = self.child.conn
        conn.settimeout(max(0.0, self.candidate_deadline - time.monotonic()))
        try:
            conn.sendall(job)
        except OSError:
            pass  # the child died or stalled while reading; its driver judges it

    def _watch(self) -> None:
        """Wake when the driver writes or ends its side of the channel, or at the deadline."""
        poller = select.poll()
        poller.register(self.channel, select.POLLIN | select.POLLRDHUP)
        while not self._finished():
            now = time.monotonic()
            if now >= self.candidate_deadline:
                # This process may wake late (a busy machine, other threads): what the driver has
                # already sent is judged first, by the driver's own timestamps (see _handle).
                self._read_messages()
                if not self._finished():
                    self._fail_if_past(now)
            else:
                poller.poll(1000 * (self.candidate_deadline - now))
                self._read_messages()

    def _fail_if_past(self, moment: float) -> bool:
        """Fail the run if ``moment`` is at or past the candidate's deadline."""
        if moment < self.candidate_deadline:
            return False
        self._fail(
            f"exceeded the per-candidate time limit of {self.limits.candidate_seconds:g} s "
            f"after {len(self.solutions)} of {self.count} instances"
        )
        return True

    def _read_messages(self) -> None:
        """Read what the child has sent so far; a chatty child cannot keep this loop from a deadline."""
        while not self._finished():
            try:
                chunk = self.channel.recv(1 << 20)
            except BlockingIOError:
                return
            if not chunk:  # every copy of the driver's end is closed: it has exited
                self.child_closed = True
                return
            self.received += len(chunk)
            if self.received > MAX_CANDIDATE_BYTES:
                raise ChannelError(f"the child sent more than {MAX_CANDIDATE_BYTES >> 20} MiB")  # via its driver
            for message in self.reader.feed(chunk):
                self._handle(message)
            if time.monotonic() >= self.candidate_deadline:
                return  # _watch judges the deadline

    def _handle(self, message: dict[str, Any]) -> None:
        """Judge one message. Each must move the run forward: a repeated or stray one is an error."""
        keys = frozenset(message)
        if keys in _SOLUTION_KEYS:
            index, at = message["index"], message["at"]
            if not self.loaded or type(index) is not int or index != len(self.solutions) or index >= self.count:
                raise ChannelError("the child reported solutions out of order")
            if type(at) not in (int, float):
                raise ChannelError("the child sent a solution without a valid time")
            if self._fail_if_past(min(float(at), time.monotonic())):  # read late, but sent past the deadline
                return
            self.solutions.append(decode_solution(message["solution"]))
            self.done = self.driver_done = message.get("done") is True and len(self.solutions) == self.count
        elif message == {"loaded": True} and not self.loaded:
            self.loaded = True
        elif message == {"done": True} and self.loaded and self.count == 0:
            self.done = self.driver_done = True
        elif len(failure := keys - {"index"}) == 1 and failure <= _FAILURE_KEYS:
            (kind,) = failure
            index = message.get("index")
            named = type(index) is int and self.loaded and len(self.solutions) <= index < self.count
            self.driver_done = True
            if kind == "died" and type(message[kind]) is int:
                self.died = (message[kind], index if named else None)
            else:
                self._fail(str(message[kind])[:500], index if named else None)
        else:
            raise ChannelError(f"the child sent an unexpected message {sorted(message)[:5]}")

    def _kill_and_reap(self) -> None:
        """SIGKILL the child's group; after a failure, wait until the fork server has reaped it.

        Waiting lets the verdict name the cause and guarantees nothing of the candidate is alive
        when ``run`` returns. After success the child is exiting anyway: waiting adds latency.
        """
        self.child.kill()
        if not self.done:
            self.child.read_status(_REAP_GRACE_SECONDS)

    def _finished(self) -> bool:
        return self.done or self.failure is not None or self.child_closed or self.died is not None

    def _exit_reason(self, progress: str) -> str:
        """Why the child ended, from the fork server's record of it."""
        if self.child.exit_status is None and self.child.server_gone:
            return f"the sandbox's fork server died {progress}"
        return exit_reason(self.child.exit_status, progress)
