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
import ctypes.util
import errno
import os

DENIED_SYSCALLS: tuple[str, ...] = (
    # debugging, other processes' memory, kernel objects shared across processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "lookup_dcookie", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # signals and process handles. The fork server needs kill and tgkill, so the filter every
    # process below it inherits lets those two through (zygote.SERVER_SYSCALLS): as root, a
    # candidate may call kill, and its uid of its own is what keeps the signal from any other
    # process; where candidates share a uid, a second filter refuses them kill and tgkill too.
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

_F_SETFL, _F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 4, 8, 10, 15
_FIOASYNC, _FIOSETOWN, _SIOCSPGRP = 0x5452, 0x8901, 0x8902
_COMMAND = 0xFFFF_FFFF
"""The command argument of fcntl and ioctl is a 32-bit int: compared under this mask, so that
setting the upper half of the register cannot slip a command past the filter."""

DENIED_ARGUMENTS: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...] = (
    ("fcntl", ((1, _COMMAND, _F_SETOWN),)),
    ("fcntl", ((1, _COMMAND, _F_SETOWN_EX),)),
    ("fcntl", ((1, _COMMAND, _F_SETSIG),)),
    ("fcntl", ((1, _COMMAND, _F_SETFL), (2, os.O_ASYNC, os.O_ASYNC))),
    ("ioctl", ((1, _COMMAND, _FIOSETOWN),)),
    ("ioctl", ((1, _COMMAND, _SIOCSPGRP),)),
    ("ioctl", ((1, _COMMAND, _FIOASYNC),)),
)
"""Calls refused by their arguments: (system call, ((argument, mask, value), ...)), refused when
``argument & mask == value`` for every comparison. They make a file's owner, a process named by
pid, receive a signal (any signal, with F_SETSIG) on every write: a signal that reaches what the
uid does not protect, where candidates share one. (The ioctl numbers are the generic ones, as on
x86 and arm.)"""

_SONAME = "libseccomp.so.2"
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_BYTES = 8
_SCMP_CMP_MASKED_EQ = 7


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
        denied_arguments: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...] = DENIED_ARGUMENTS,
    ) -> None:
        self._program = ctypes.create_string_buffer(_compile(denied, denied_arguments))
        self._fprog = _SockFprog(len(self._program.raw) // _BPF_INSTRUCTION_BYTES, ctypes.addressof(self._program))
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl

    def install(self) -> None:
        """Install the filter on this process (needs no-new-privileges, which the fork server set)."""
        if self._prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"seccomp filter refused: {os.strerror(code)}")


def _compile(denied: tuple[str, ...], denied_arguments: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...]) -> bytes:
    """The BPF program for ``denied`` and ``denied_arguments``, compiled by libseccomp and read back as bytes."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or _SONAME, use_errno=True)
    except OSError:
        raise SeccompUnavailable("libseccomp is not installed (Debian: libseccomp2)") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
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
            array = (_ArgumentComparison * len(comparisons))(
                *(_ArgumentComparison(argument, _SCMP_CMP_MASKED_EQ, mask, value) for argument, mask, value in comparisons)
            )
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
