"""The sandboxed candidate process, from the fork until ``os._exit``: the candidate's function,
and nothing a score depends on.

Trusted set-up happens first (process group, stdio, a uid of its own; the namespaces, the empty
root, the empty environment, the seccomp filter, no-new-privileges and default signal dispositions
are inherited from the fork server), then the child waits for its job, applies its resource
limits, arms the guards, and only then runs candidate code. It says when its module has run, then
answers batches of calls with ``Task.answer``, each answer in a message of its own; the task's
driver runs in a trusted driver process (``driver.py``), which the parent connects to this
child's channel and which times every answer on its own clock: this process reports no time.

Nothing here is trusted by anyone: a candidate that takes this process over (the guards off,
raw memory) can only change the answers it sends, which the driver checks against the state it
holds. Each page of the fork server's memory that a child writes to is copied first, so whatever
can be built before the fork is built there, once (``Prepared``), and the job arrives as a fixed
header and the module already compiled by the parent: running the compiler in a fresh child writes
many pages, loading its marshalled output few (the figures: experiments/bench/RESULTS.md, Sandbox).
"""

from __future__ import annotations

import builtins
import marshal
import os
import struct
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from coevo import pyast
from coevo.evaluate.channel import (
    decode_solution,
    frame,
    read_exactly,
    read_frame,
    write_all,
)
from coevo.evaluate.guard import Guard
from coevo.evaluate.isolation import apply_limits, drop_privileges
from coevo.evaluate.seccomp import SyscallFilter
from tasks.base import HEURISTIC, Instance, InvalidSolution, Task
from tasks.plain_data import encode_solution

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
        memory_mb, cpu_seconds, file_bytes, length = _JOB_HEADER.unpack(read_exactly(fd, _JOB_HEADER.size))
        return cls(read_exactly(fd, length), memory_mb, cpu_seconds, file_bytes)


@dataclass(frozen=True)
class Prepared:
    """What every driver and candidate needs, built once in the fork server and inherited."""

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
    """Installed in each child: no new process, no call on another one (see ``zygote``)."""


def run_child(conn_fd: int, prepared: Prepared, setup: ChildSetup, number: int) -> NoReturn:
    """Isolate this process, run the job read from ``conn_fd``, answer calls, and exit.

    ``number`` is this child's among the fork server's (each gets its own, for its uid)."""
    send: Callable[[dict[str, Any]], None] = lambda message: write_all(conn_fd, frame(message))  # noqa: E731
    exit_code = EXIT_SETUP_FAILED
    try:
        isolate(setup.stdio, conn_fd)
        drop_privileges(setup.own_uid, number)
        job = Job.read(conn_fd)  # a child may be forked ahead of need: it waits here for its job
        apply_limits(job.memory_mb, job.cpu_seconds, job.file_bytes)
        if setup.syscall_filter is not None:
            setup.syscall_filter.install()
        exit_code = 0
        _run(job, prepared, conn_fd, send)
    except BaseException as error:  # noqa: BLE001 - the child must always report, then exit
        send({"error": f"sandbox failure: {type(error).__name__}: {error}"})
    finally:
        os._exit(exit_code)


def isolate(stdio: int, *kept: int) -> None:
    """Own process group, stdio on /dev/null, no inherited descriptor but ``kept``."""
    os.setpgid(0, 0)
    for fd in (0, 1, 2):
        os.dup2(stdio, fd)
    low = 3
    for fd in sorted(kept):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def describe(error: BaseException, memory_mb: int) -> str:
    if isinstance(error, MemoryError):
        return f"MemoryError (memory limit {memory_mb} MiB)"
    try:
        detail = str(error)[:300]
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not hide the real error
        detail = "<unprintable>"
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def _run(job: Job, prepared: Prepared, conn_fd: int, send: Callable[[dict[str, Any]], None]) -> None:
    """Arm the guards, execute the candidate's module, say so, then answer batches of calls."""
    function_name = prepared.task.function_name
    module_code = marshal.loads(job.module)  # written by the trusted parent
    if prepared.guard is not None:
        prepared.guard.arm(module_code, lambda reason: send({"violation": reason}))
    try:
        exec(module_code, prepared.namespace)  # noqa: S102 - the candidate, under the guards just armed
    except BaseException as error:  # noqa: BLE001
        send({"error": f"the module raised {describe(error, job.memory_mb)}"})
        return
    function = prepared.namespace.get(function_name)
    if not callable(function):
        send({"error": f"{function_name} is not a function"})
        return
    send({"loaded": True})  # the driver starts the first instance's clock when this arrives
    _answer_calls(job, prepared, function, conn_fd, send)


class _Failed(Exception):
    """A call failed: the message to send (the driver blames the instance whose answer it awaits)."""


def _answer_calls(
    job: Job, prepared: Prepared, function: Callable[..., Any], conn_fd: int, send: Callable[[dict[str, Any]], None]
) -> None:
    """One message per part of each request, sent as soon as the part is answered, or the first failure.

    A request is a batch of calls (``"calls"``: one per live instance of a lockstep step), or a
    window of instances to run whole (``"run"``: ``Task.child_runs_driver``, see ``_run_driver``).
    The driver times each part from the arrival of the one before, so each goes out at once.
    ``Task.answer_state`` is built on an instance's first call and kept while the instance has
    calls: an instance missing from a batch has finished (every live driver calls once per step).
    """
    task, instances = prepared.task, prepared.instances
    states: dict[int, Any] = {}
    while True:
        try:
            request = read_frame(conn_fd)
        except EOFError:
            return  # the driver is done with this candidate
        kept = {}
        try:
            for item in request["calls"] if "calls" in request else request["run"]:
                if "calls" in request:
                    index, encoded_args = item
                    state = kept[index] = states[index] if index in states else task.answer_state(instances[index])
                    send({"answer": _answer(job, prepared, function, state, decode_solution(encoded_args))})
                else:
                    send({"answer": _run_driver(job, prepared, function, item)})
        except _Failed as failed:
            send(failed.args[0])
            return
        states = kept


def _answer(job: Job, prepared: Prepared, function: Callable[..., Any], state: Any, args: Any) -> Any:
    """One call's encoded answer."""
    try:
        return encode_solution(prepared.task.answer(function, state, *args))
    except InvalidSolution as invalid:
        raise _Failed({"invalid": str(invalid)}) from None
    except BaseException as error:  # noqa: BLE001
        raise _Failed({"error": f"{prepared.task.function_name} raised {describe(error, job.memory_mb)}"}) from None


def _run_driver(job: Job, prepared: Prepared, function: Callable[..., Any], index: int) -> list[Any]:
    """Every answer of one instance, from this process's own copy of the task's driver.

    The trusted driver replays them and checks each; this copy only saves a message per call,
    and whatever it gets wrong only misleads this candidate's own answers.
    """
    instance = prepared.instances[index]
    state = prepared.task.answer_state(instance)
    driver = prepared.task.drive(HEURISTIC, instance)
    answers, answer = [], None
    try:
        while True:
            try:
                call = driver.send(answer)
            except StopIteration:
                return answers
            except InvalidSolution as invalid:
                raise _Failed({"invalid": str(invalid)}) from None
            except Exception as error:  # noqa: BLE001 - an answer that trips the driver is the candidate's
                raise _Failed({"error": f"the answer broke the driver: {describe(error, job.memory_mb)}"}) from None
            answers.append(_answer(job, prepared, function, state, call.args))
            answer = decode_solution(answers[-1])  # what the trusted driver will see
    finally:
        driver.close()
