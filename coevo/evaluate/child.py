"""The body of one sandboxed child, from the fork until ``os._exit``.

Trusted set-up happens first (process group, stdio, a uid of its own; the namespaces, the empty
root, the empty environment, the seccomp filter, no-new-privileges and default signal dispositions
are inherited from the fork server), then the child waits for its job, applies its resource
limits, arms the guards, and only then runs candidate code. Every instance's solution is reported as soon as it
is built, so the parent can hold the candidate to a per-instance deadline.

Each page of the fork server's memory that a child writes to is copied first (a few
microseconds per page), so whatever can be built before the fork is built there, once
(``Prepared``), and the job arrives as a fixed header and the module already compiled by the
parent: running the compiler in a fresh child costs about 0.3 ms of copied pages, loading its
marshalled output a small fraction of that.
"""

from __future__ import annotations

import builtins
import marshal
import os
import struct
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from coevo import pyast
from coevo.evaluate.channel import encode_solution, frame
from coevo.evaluate.guard import Guard
from coevo.evaluate.isolation import apply_limits, drop_privileges
from coevo.evaluate.seccomp import SyscallFilter
from tasks.base import Instance, InvalidSolution, Task

EXIT_SETUP_FAILED = 87

_JOB_HEADER = struct.Struct("<IdQQ")
"""memory_mb, cpu_seconds, file_bytes, length of the marshalled module that follows."""


@dataclass(frozen=True)
class Job:
    """What the parent sends a child: the candidate's compiled module and its resource limits."""

    module: bytes
    """The candidate's module code object, marshalled (the parent compiled it: see the module doc)."""
    memory_mb: int
    cpu_seconds: float
    file_bytes: int

    @classmethod
    def compile(cls, source: str, memory_mb: int, cpu_seconds: float, file_bytes: int) -> Job:
        """The job for ``source``, compiled here in the trusted parent; raises SyntaxError or ValueError."""
        return cls(marshal.dumps(pyast.compile_module(source, "<candidate>")), memory_mb, cpu_seconds, file_bytes)

    def encode(self) -> bytes:
        return _JOB_HEADER.pack(self.memory_mb, self.cpu_seconds, self.file_bytes, len(self.module)) + self.module

    @classmethod
    def read(cls, fd: int) -> Job:
        memory_mb, cpu_seconds, file_bytes, length = _JOB_HEADER.unpack(_read_exactly(fd, _JOB_HEADER.size))
        return cls(_read_exactly(fd, length), memory_mb, cpu_seconds, file_bytes)


@dataclass(frozen=True)
class Prepared:
    """What every child needs, built once in the fork server and inherited through the fork."""

    task: Task
    instances: list[Instance]
    """The instances being evaluated: the only ones the fork server, hence a child, holds."""
    guard: Guard | None
    """The Python-level guards; None only to test the kernel layers alone (``python_guards=False``)."""
    namespace: dict[str, Any]
    """The candidate module's namespace, restricted builtins in place (each child writes its own copy)."""

    @classmethod
    def build(cls, task: Task, instances: list[Instance], python_guards: bool = True) -> Prepared:
        guard = Guard() if python_guards else None
        module = types.ModuleType("candidate")
        sys.modules[module.__name__] = module  # dataclasses look the defining module up by name
        namespace = vars(module)
        namespace["__builtins__"] = guard.builtins if guard else builtins
        return cls(task, instances, guard, namespace)


@dataclass(frozen=True)
class ChildSetup:
    """What the fork server hands each child to finish its confinement."""

    stdio: int
    """An open /dev/null (the empty root has no /dev), for stdin, stdout and stderr."""
    own_uid: bool
    syscall_filter: SyscallFilter | None
    """Installed in each child where children share a uid (see ``zygote``)."""


def run_child(conn_fd: int, prepared: Prepared, setup: ChildSetup) -> NoReturn:
    """Isolate this process, run the job read from ``conn_fd``, report, and exit."""
    exit_code = EXIT_SETUP_FAILED
    try:
        _isolate(conn_fd, setup.stdio)
        drop_privileges(setup.own_uid)
        job = Job.read(conn_fd)  # a child may be forked ahead of need: it waits here for its job
        apply_limits(job.memory_mb, job.cpu_seconds, job.file_bytes)
        if setup.syscall_filter is not None:
            setup.syscall_filter.install()
        exit_code = 0
        _run(job, prepared, lambda message: _send(conn_fd, message))
    except BaseException as error:  # noqa: BLE001 - the child must always report, then exit
        _send(conn_fd, {"error": f"sandbox failure: {type(error).__name__}: {error}"})
    finally:
        try:
            # The parent waits for this hang-up, not for each message; closing the channel here
            # signals it at once, where exiting would close it only after the memory is torn down.
            os.close(conn_fd)
        finally:
            os._exit(exit_code)


def _isolate(conn_fd: int, stdio: int) -> None:
    """Own process group, stdio on /dev/null, no other inherited descriptor."""
    os.setpgid(0, 0)
    for fd in (0, 1, 2):
        os.dup2(stdio, fd)
    os.closerange(3, conn_fd)
    os.closerange(conn_fd + 1, 1 << 16)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the parent closed the channel before sending the job")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _send(fd: int, message: dict[str, Any]) -> None:
    data = memoryview(frame(message))
    while data:
        data = data[os.write(fd, data) :]


def _describe(error: BaseException, memory_mb: int) -> str:
    if isinstance(error, MemoryError):
        return f"MemoryError (memory limit {memory_mb} MiB)"
    try:
        detail = str(error)[:300]
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not hide the real error
        detail = "<unprintable>"
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def _run(job: Job, prepared: Prepared, send: Callable[[dict[str, Any]], None]) -> None:
    """Arm the guards, execute the candidate, and stream one message per instance.

    Messages carry the child's monotonic clock (shared by all processes on the machine), so
    the parent can read them in one go at the end and still check each instance's deadline.
    """
    task, namespace, function_name = prepared.task, prepared.namespace, prepared.task.function_name
    module_code = marshal.loads(job.module)  # written by the trusted parent
    if prepared.guard is not None:
        prepared.guard.arm(module_code, lambda reason: send({"violation": reason}))
    try:
        exec(module_code, namespace)  # noqa: S102 - the candidate, under the guards just armed
    except BaseException as error:  # noqa: BLE001
        send({"error": f"the module raised {_describe(error, job.memory_mb)}"})
        return
    heuristic = namespace.get(function_name)
    if not callable(heuristic):
        send({"error": f"{function_name} is not a function"})
        return
    send({"loaded": True})
    last = len(prepared.instances) - 1
    for index, instance in enumerate(prepared.instances):
        try:
            solution = encode_solution(task.construct(heuristic, instance))
        except InvalidSolution as invalid:
            send({"index": index, "invalid": str(invalid)})
            return
        except BaseException as error:  # noqa: BLE001
            send({"index": index, "error": f"{function_name} raised {_describe(error, job.memory_mb)}"})
            return
        message = {"index": index, "solution": solution, "at": time.monotonic()}
        if index == last:
            message["done"] = True  # in the same frame: one write and one read fewer per candidate
        send(message)
    if last < 0:
        send({"done": True})
