"""Each candidate's own seccomp filter (``seccomp.refused_on_other_processes``), on its own.

A process forked here installs it and makes every call it must refuse on another process (the
test itself, whose settings each call writes back unchanged, so a call let through changes
nothing), then the same call on itself, which must go through.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
from collections.abc import Callable

import pytest

from coevo.evaluate.isolation import forbid_privilege_gain, fork_alone
from coevo.evaluate.seccomp import SyscallFilter, refused_on_other_processes

_LIBC = ctypes.CDLL(None, use_errno=True)
_SYS_IOPRIO_GET, _SYS_IOPRIO_SET, _IOPRIO_WHO_PROCESS = 252, 251, 1


def _syscall(*args: int) -> int:
    result = _LIBC.syscall(*args)
    if result == -1:
        raise OSError(ctypes.get_errno(), "refused")
    return result


CALLS: dict[str, Callable[[int], object]] = {
    "prlimit64": lambda pid: resource.prlimit(pid, resource.RLIMIT_CORE, resource.prlimit(pid, resource.RLIMIT_CORE)),
    "getpriority": lambda pid: os.getpriority(os.PRIO_PROCESS, pid),
    "setpriority": lambda pid: os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0)),
    "sched_setscheduler": lambda pid: os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0)),
    "sched_setparam": lambda pid: os.sched_setparam(pid, os.sched_param(0)),
    "sched_getaffinity": os.sched_getaffinity,
    "sched_setaffinity": lambda pid: os.sched_setaffinity(pid, os.sched_getaffinity(0)),
    "ioprio_set": lambda pid: _syscall(
        _SYS_IOPRIO_SET, _IOPRIO_WHO_PROCESS, pid, _syscall(_SYS_IOPRIO_GET, _IOPRIO_WHO_PROCESS, 0)
    ),
    "kill": lambda pid: os.kill(pid, 0),
}
"""Each call's effect on ``pid`` is none: it reads, or sets what the caller itself has (every
process here runs SCHED_OTHER, and the test's own settings are the forked process's)."""


def _outcomes(fork: Callable[[], int], targets: Callable[[], tuple[int, int]]) -> dict[str, list[int]]:
    """Per call, its errno (0: it went through) on another process and on the caller itself."""
    read_end, write_end = os.pipe()
    pid = fork()
    if pid == 0:
        try:
            forbid_privilege_gain()
            other, own = targets()
            SyscallFilter((), refused_on_other_processes(alone_in_pid_namespace=os.getpid() == 1)).install()
            outcomes = {}
            for name, call in CALLS.items():
                outcomes[name] = []
                for target in (other, own):
                    try:
                        call(target)
                        outcomes[name].append(0)
                    except OSError as error:
                        outcomes[name].append(error.errno)
            os.write(write_end, json.dumps(outcomes).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reply:
        data = reply.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_a_child_may_not_name_another_process_but_may_name_itself() -> None:
    outcomes = _outcomes(os.fork, lambda: (os.getppid(), 0))
    assert outcomes == {name: [errno.EPERM, 0] for name in CALLS}


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace of its own needs root here")
def test_alone_in_its_pid_namespace_it_is_pid_1_and_every_other_pid_is_refused() -> None:
    """Pid 2 names no process there: the filter refuses it (EPERM) before the kernel would (ESRCH)."""
    outcomes = _outcomes(fork_alone, lambda: (2, 1))
    assert outcomes == {name: [errno.EPERM, 0] for name in CALLS}
