"""The sandboxed candidate process: the candidate's function, and nothing a score depends on.

Its trusted driver process (``driver.py``) forks it, and it confines itself before any candidate
code runs: every descriptor but its two pipes closed, a uid of its own (or no capabilities), the
resource limits, the per-child seccomp filter where children share a uid, then the Python guards.
The namespaces, the empty root and the empty environment come from the fork server. It then
loads the candidate's module and answers the driver's batches of calls with ``Task.answer``,
until the driver closes the calls pipe.

Nothing here is trusted by anyone: a candidate that takes this process over (the guards off,
raw memory) can only change the answers it sends, which the driver checks against the state it
holds. Whatever can be built before the fork is built in the fork server, once (``Prepared``):
every page a child writes is copied first.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from coevo.evaluate.channel import Progress, decode_solution, encode_solution, frame, read_frame, write_all
from coevo.evaluate.guard import Guard
from coevo.evaluate.isolation import apply_limits, drop_privileges
from coevo.evaluate.seccomp import SyscallFilter
from tasks.base import Instance, InvalidSolution, Task

EXIT_SETUP_FAILED = 87


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
    """What the fork server hands each driver, and the driver its candidate, for their confinement."""

    stdio: int
    """An open /dev/null (the empty root has no /dev), for stdin, stdout and stderr."""
    own_uid: bool
    syscall_filter: SyscallFilter | None
    """Installed in each candidate where candidates share a uid (see ``zygote``)."""


@dataclass(frozen=True)
class CandidateJob:
    """What the driver hands its candidate process at the fork."""

    module: bytes
    """The candidate's module code object, marshalled by the trusted parent."""
    memory_mb: int
    cpu_seconds: float
    file_bytes: int
    calls: int
    """The read end of the driver's batches of calls."""
    answers: int
    """The write end for this process's messages to the driver."""
    progress: Progress


def run_candidate(job: CandidateJob, prepared: Prepared, setup: ChildSetup) -> NoReturn:
    """Confine this freshly forked process, load the candidate, answer the driver's calls, exit."""
    send: Callable[[dict[str, Any]], None] = lambda message: write_all(job.answers, frame(message))  # noqa: E731
    exit_code = EXIT_SETUP_FAILED
    try:
        low, high = sorted((job.calls, job.answers))
        os.closerange(3, low)  # the driver's channel to the parent above all
        os.closerange(low + 1, high)
        os.closerange(high + 1, 1 << 16)
        drop_privileges(setup.own_uid)
        apply_limits(job.memory_mb, job.cpu_seconds, job.file_bytes)
        if setup.syscall_filter is not None:
            setup.syscall_filter.install()
        exit_code = 0
        _run(job, prepared, send)
    except BaseException as error:  # noqa: BLE001 - the candidate must always report, then exit
        send({"error": f"sandbox failure: {type(error).__name__}: {error}"})
    finally:
        os._exit(exit_code)


def describe(error: BaseException, memory_mb: int) -> str:
    if isinstance(error, MemoryError):
        return f"MemoryError (memory limit {memory_mb} MiB)"
    try:
        detail = str(error)[:300]
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not hide the real error
        detail = "<unprintable>"
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def _run(job: CandidateJob, prepared: Prepared, send: Callable[[dict[str, Any]], None]) -> None:
    """Arm the guards, execute the candidate's module, then answer batches of calls."""
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
    send({"loaded": True})
    _answer_calls(job, prepared, function, send)


def _answer_calls(
    job: CandidateJob, prepared: Prepared, function: Callable[..., Any], send: Callable[[dict[str, Any]], None]
) -> None:
    """One reply per batch: every call's answer and how long it took, or the first call's failure.

    ``Task.answer_state`` is built on an instance's first call and kept while the instance has
    calls: an instance missing from a batch has finished (every live driver calls once per step).
    """
    task, instances, function_name = prepared.task, prepared.instances, prepared.task.function_name
    states: dict[int, Any] = {}
    batch_number = 0
    while True:
        try:
            batch = read_frame(job.calls)["calls"]
        except EOFError:
            return  # the driver is done with this candidate
        batch_number += 1
        answers, seconds, kept = [], [], {}
        for position, (index, encoded_args) in enumerate(batch):
            args = decode_solution(encoded_args)
            state = kept[index] = states[index] if index in states else task.answer_state(instances[index])
            started = time.monotonic()
            try:
                answers.append(encode_solution(task.answer(function, state, *args)))
            except InvalidSolution as invalid:
                send({"call": position, "invalid": str(invalid)})
                return
            except BaseException as error:  # noqa: BLE001
                send({"call": position, "error": f"{function_name} raised {describe(error, job.memory_mb)}"})
                return
            finished = time.monotonic()
            seconds.append(finished - started)
            job.progress.record(batch_number, position + 1, finished)
        states = kept
        send({"answers": answers, "seconds": seconds})
