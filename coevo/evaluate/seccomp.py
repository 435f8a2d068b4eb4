"""A seccomp filter for candidates: a thin ctypes layer over the system's libseccomp.

libseccomp compiles the rules into a BPF program once, in the fork server, for the machine's
own architectures (it also refuses foreign ABIs, such as x32 system calls on x86-64). Each child
then installs that program with a single ``prctl``, right before candidate code runs: compiling
per child would cost far more than the fork itself.

Every refused call fails with EPERM instead of killing the process, so a candidate that tries
one gets an ordinary error and a verdict with a reason, not a silent death.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

DENIED_SYSCALLS: tuple[str, ...] = (
    # debugging, other processes' memory, kernel objects shared across processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "lookup_dcookie", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # signals and process handles. The fork server needs kill and tgkill, so the filter every
    # process below it inherits lets those two through (zygote.SERVER_SYSCALLS); each child's own
    # filter refuses them on any process but itself (refused_on_other_processes).
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "pidfd_open", "pidfd_send_signal",
    # new processes, threads, programs and namespaces
    "fork", "vfork", "clone", "clone3", "execve", "execveat", "unshare", "setns",
    # file systems and mounts
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick",
    "move_mount", "open_tree", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "fanotify_init", "quotactl", "quotactl_fd", "swapon", "swapoff", "acct", "memfd_create",
    # sockets of any family, and System V / POSIX IPC (channels between candidates)
    "socket", "socketpair",
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semtimedop", "semctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    # the machine itself
    "reboot", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "syslog", "vhangup", "iopl", "ioperm", "uselib", "personality",
)  # fmt: skip
"""System calls no heuristic needs. CPython itself needs none of them to run code that is
already loaded: the fork server has imported every allowed module before any child starts."""

Comparison = tuple[int, int, int, int]
"""libseccomp's ``struct scmp_arg_cmp``: (argument, operator, datum_a, datum_b)."""
Rule = tuple[str, tuple[Comparison, ...]]
"""A system call refused when every one of its comparisons holds."""

_SCMP_CMP_NE, _SCMP_CMP_GT, _SCMP_CMP_MASKED_EQ = 1, 6, 7


def _masked_equal(argument: int, mask: int, value: int) -> Comparison:
    return (argument, _SCMP_CMP_MASKED_EQ, mask, value)


def _above(argument: int, value: int) -> Comparison:
    """The argument's whole 64-bit register, unsigned, exceeds ``value`` (a negative int does)."""
    return (argument, _SCMP_CMP_GT, value, 0)


def _differs(argument: int, value: int) -> Comparison:
    return (argument, _SCMP_CMP_NE, value, 0)


_F_SETFL, _F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 4, 8, 10, 15
_FIOASYNC, _FIOSETOWN, _SIOCSPGRP = 0x5452, 0x8901, 0x8902
_COMMAND = 0xFFFF_FFFF
"""The command argument of fcntl and ioctl is a 32-bit int: compared under this mask, so that
setting the upper half of the register cannot slip a command past the filter."""

DENIED_ARGUMENTS: tuple[Rule, ...] = (
    ("fcntl", (_masked_equal(1, _COMMAND, _F_SETOWN),)),
    ("fcntl", (_masked_equal(1, _COMMAND, _F_SETOWN_EX),)),
    ("fcntl", (_masked_equal(1, _COMMAND, _F_SETSIG),)),
    ("fcntl", (_masked_equal(1, _COMMAND, _F_SETFL), _masked_equal(2, os.O_ASYNC, os.O_ASYNC))),
    ("ioctl", (_masked_equal(1, _COMMAND, _FIOSETOWN),)),
    ("ioctl", (_masked_equal(1, _COMMAND, _SIOCSPGRP),)),
    ("ioctl", (_masked_equal(1, _COMMAND, _FIOASYNC),)),
)
"""Calls refused by their arguments. These make a file's owner, a process named by pid, receive
a signal (any signal, with F_SETSIG) on every write: a signal that reaches what the uid does not
protect, where candidates share one. (The ioctl numbers are the generic ones, as on x86 and arm.)"""

_PID_FIRST = ("kill", "prlimit64", "sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity",
              "sched_getscheduler", "sched_getparam", "sched_getattr", "sched_getaffinity", "sched_rr_get_interval",
              "migrate_pages", "move_pages")  # fmt: skip
"""Calls whose first argument is the pid of the process they read or change."""
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1


def refused_on_other_processes(alone_in_pid_namespace: bool) -> tuple[Rule, ...]:
    """Calls that read or change another process named by pid, refused unless the pid is the caller.

    Within a user's processes the kernel lets any of them set another's limits (prlimit64), its
    priority, scheduling policy, CPU affinity and I/O priority, read them (a channel between
    candidates), or signal it: where candidates share a uid, this filter keeps them apart even
    where the kernel gives none a PID namespace of its own.
    A pid names the caller when it is 0 or, for a process alone in a PID namespace of its own
    (its init, pid 1 there), 1: every larger value of the whole register, negative ones included
    (a process group, every process), is refused. ``setpriority`` and ``ioprio_*`` may target
    only a process, not a group or a user. (The other signal calls, ``tkill``, ``rt_sigqueueinfo``,
    ``rt_tgsigqueueinfo`` and ``pidfd_*``, are in ``DENIED_SYSCALLS`` whatever their target.)
    """
    own = 1 if alone_in_pid_namespace else 0
    rules: list[Rule] = [(name, (_above(0, own),)) for name in _PID_FIRST]
    rules += [("tgkill", (_above(0, own),)), ("tgkill", (_above(1, own),))]
    for name, process in (("setpriority", _PRIO_PROCESS), ("getpriority", _PRIO_PROCESS),
                          ("ioprio_set", _IOPRIO_WHO_PROCESS), ("ioprio_get", _IOPRIO_WHO_PROCESS)):  # fmt: skip
        rules += [(name, (_differs(0, process),)), (name, (_above(1, own),))]
    return tuple(rules)


_CLONE_NEWPID = 0x20000000


def only_pid_namespaces() -> tuple[Rule, ...]:
    """``unshare`` and ``setns`` refused for anything but a PID namespace: the fork server makes one
    per candidate's child (``isolation.candidate_forker``); each child refuses both outright."""
    return (("unshare", (_differs(0, _CLONE_NEWPID),)), ("setns", (_differs(1, _CLONE_NEWPID),)))


_SONAME = "libseccomp.so.2"
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_BYTES = 8


class _ArgumentComparison(ctypes.Structure):
    """libseccomp's ``struct scmp_arg_cmp``."""

    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompUnavailable(Exception):
    """The kernel or the system library cannot provide the filter; the message says which."""


class SyscallFilter:
    """A compiled filter, built once and installed in any number of forked children."""

    def __init__(
        self,
        denied: tuple[str, ...] = DENIED_SYSCALLS,
        denied_arguments: tuple[Rule, ...] = DENIED_ARGUMENTS,
    ) -> None:
        self._program = ctypes.create_string_buffer(_compile(denied, denied_arguments))
        self._fprog = _SockFprog(len(self._program.raw) // _BPF_INSTRUCTION_BYTES, ctypes.addressof(self._program))
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl

    def install(self) -> None:
        """Install the filter on this process (needs no-new-privileges, which the fork server set)."""
        if self._prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"seccomp filter refused: {os.strerror(code)}")


def _compile(denied: tuple[str, ...], denied_arguments: tuple[Rule, ...]) -> bytes:
    """The BPF program for ``denied`` and ``denied_arguments``, compiled by libseccomp and read back as bytes."""
    lib = _libseccomp()
    context = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not context:
        raise SeccompUnavailable("libseccomp could not create a filter")
    program = os.memfd_create("coevo-seccomp")
    try:
        rules = [(syscall, ()) for syscall in denied] + list(denied_arguments)
        for syscall, comparisons in rules:
            number = lib.seccomp_syscall_resolve_name(syscall.encode())
            if number < 0:
                continue  # not a system call on this architecture
            array = (_ArgumentComparison * len(comparisons))(*(_ArgumentComparison(*compared) for compared in comparisons))
            if lib.seccomp_rule_add_array(context, _SCMP_ACT_ERRNO | errno.EPERM, number, len(comparisons), array) != 0:
                raise SeccompUnavailable(f"libseccomp refused the rule for {syscall}")
        if lib.seccomp_export_bpf(context, program) != 0:
            raise SeccompUnavailable("libseccomp could not export the filter")
        os.lseek(program, 0, os.SEEK_SET)
        with open(program, "rb", closefd=False) as exported:
            return exported.read()
    finally:
        os.close(program)
        lib.seccomp_release(context)


def load_libseccomp() -> None:
    """Load libseccomp now, while its file is visible: filters compiled later need no file (the
    fork server compiles its children's filter inside its empty root). Raises SeccompUnavailable."""
    _libseccomp()


@functools.cache
def _libseccomp() -> ctypes.CDLL:
    """The system's libseccomp, loaded once."""
    try:
        lib = ctypes.CDLL(_SONAME, use_errno=True)
    except OSError:
        lib = _found_libseccomp()
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _found_libseccomp() -> ctypes.CDLL:
    """libseccomp under another name than ``_SONAME``, as ``ctypes.util`` finds it.

    Only as a fallback: ``ctypes.util`` imports subprocess, shutil and their compression modules,
    and whatever the fork server imports is copied into every candidate's process."""
    import ctypes.util

    found = ctypes.util.find_library("seccomp")
    try:
        return ctypes.CDLL(found or _SONAME, use_errno=True)
    except OSError:
        raise SeccompUnavailable("libseccomp is not installed (Debian: libseccomp2)") from None
