"""The body of one sandboxed child, from the fork until ``os._exit``.

Trusted set-up happens first (process group, stdio, network namespace, working directory,
resource limits, dropped privileges), then the job is read, the guards are armed and only then
does candidate code run. Every instance's solution is reported as soon as it is built, so the
parent can hold the candidate to a per-instance deadline.
"""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import resource
import signal
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

from coevo.evaluate.channel import encode_solution, frame
from coevo.evaluate.guard import install_audit_hook, restricted_builtins
from tasks.base import Instance, InvalidSolution, Task

EXIT_VIOLATION = 86
EXIT_SETUP_FAILED = 87
NOBODY = 65534
MAX_OPEN_FILES = 32
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)
BLOB_LENGTH = struct.Struct("<Q")
"""Prefix of each blob the parent sends (the job, then the instances)."""


@dataclass(frozen=True)
class Job:
    """What the parent sends a child ahead of the instances (the only ones it may see)."""

    code: str
    function_name: str
    memory_mb: int
    cpu_seconds: float
    file_bytes: int


def run_child(conn_fd: int, task: Task, workdir: str) -> NoReturn:
    """Isolate this process, run the job read from ``conn_fd``, report, and exit."""
    exit_code = EXIT_SETUP_FAILED
    try:
        _isolate(conn_fd, workdir)
        job: Job = pickle.loads(_read_blob(conn_fd))  # pickled by the trusted parent
        instances: list[Instance] = pickle.loads(_read_blob(conn_fd))
        _apply_limits(job)
        _drop_privileges()
        exit_code = 0
        _run(job, instances, task, lambda message: _send(conn_fd, message))
    except BaseException as error:  # noqa: BLE001 - the child must always report, then exit
        _send(conn_fd, {"error": f"sandbox failure: {type(error).__name__}: {error}"})
    finally:
        os._exit(exit_code)


def _isolate(conn_fd: int, workdir: str) -> None:
    """Own process group, no inherited descriptors or handlers, no network, a private cwd."""
    os.setpgid(0, 0)
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, conn_fd)
    os.closerange(conn_fd + 1, 1 << 16)
    if _LIBC.unshare(_CLONE_NEWNET) != 0:
        _LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWNET)  # unprivileged fallback; the audit hook remains
    os.chdir(workdir)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the parent closed the channel before sending the job")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_blob(fd: int) -> bytes:
    """One length-prefixed blob from the parent."""
    return _read_exactly(fd, BLOB_LENGTH.unpack(_read_exactly(fd, BLOB_LENGTH.size))[0])


def _apply_limits(job: Job) -> None:
    cpu = math.ceil(job.cpu_seconds) + 1
    for limit, value in (
        (resource.RLIMIT_AS, job.memory_mb << 20),
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_FSIZE, job.file_bytes),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
        (resource.RLIMIT_NPROC, 0),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, value if isinstance(value, tuple) else (value, value))


def _drop_privileges() -> None:
    """As root, become nobody: RLIMIT_NPROC then binds and no root-only escape remains."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # set after setuid, which clears it
    _LIBC.prctl(_PR_SET_DUMPABLE, 0)
    _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


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


def _run(job: Job, instances: list[Instance], task: Task, send: Callable[[dict[str, Any]], None]) -> None:
    """Arm the guards, execute the candidate, and stream one message per instance."""

    def violation(reason: str) -> NoReturn:
        send({"violation": reason})
        os._exit(EXIT_VIOLATION)

    builtins, gate = restricted_builtins(violation)
    module_code = compile(job.code, "<candidate>", "exec")
    namespace = {"__builtins__": builtins, "__name__": "candidate"}
    install_audit_hook(module_code, gate, violation)
    send({"started": True})
    try:
        exec(module_code, namespace)  # noqa: S102 - the candidate, under the guards just armed
    except BaseException as error:  # noqa: BLE001
        send({"error": f"the module raised {_describe(error, job.memory_mb)}"})
        return
    heuristic = namespace.get(job.function_name)
    if not callable(heuristic):
        send({"error": f"{job.function_name} is not a function"})
        return
    for index, instance in enumerate(instances):
        start = time.perf_counter()
        try:
            solution = encode_solution(task.construct(heuristic, instance))
        except InvalidSolution as invalid:
            send({"index": index, "invalid": str(invalid)})
            return
        except BaseException as error:  # noqa: BLE001
            send({"index": index, "error": f"{job.function_name} raised {_describe(error, job.memory_mb)}"})
            return
        send({"index": index, "solution": solution, "seconds": time.perf_counter() - start})
    send({"done": True})
