"""Kernel-level isolation primitives: network namespace, resource limits, privileges.

These are the layers that hold even if candidate code escaped every Python-level guard: the
kernel enforces them on the process, whatever code it runs.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import signal

NOBODY = 65534
MAX_OPEN_FILES = 32
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)


def enter_empty_network_namespace() -> bool:
    """Move this process into a new network namespace (no interfaces up); False if refused.

    Done once by the fork server, whose children all inherit the empty namespace: a namespace
    per child would cost about 3 ms of kernel time each. Without it, the audit hook still
    refuses every socket operation.
    """
    if _LIBC.unshare(_CLONE_NEWNET) == 0:
        return True
    return _LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0  # unprivileged fallback


def become_subreaper() -> None:
    """Orphans of our children are re-parented to us, so we can reap them."""
    _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1)


def apply_limits(memory_mb: int, cpu_seconds: float, file_bytes: int) -> None:
    """Hard limits (soft = hard, so the process cannot raise them back)."""
    cpu = math.ceil(cpu_seconds) + 1
    for limit, soft, hard in (
        (resource.RLIMIT_AS, memory_mb << 20, memory_mb << 20),
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU first, SIGKILL a second later
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES, MAX_OPEN_FILES),
        (resource.RLIMIT_NPROC, 0, 0),  # binds once privileges are dropped (root is exempt)
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(limit, (soft, hard))


def forbid_privilege_gain() -> None:
    """No execve by this process or any descendant can gain privileges (the flag is inherited and
    cannot be cleared). Set once in the fork server: each prctl through ctypes costs a child ~30 us."""
    _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def drop_privileges() -> None:
    """As root, become nobody; then die with the parent and refuse ptrace (no new privileges is
    inherited from the fork server, see ``forbid_privilege_gain``)."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
    _LIBC.prctl(_PR_SET_DUMPABLE, 0)
