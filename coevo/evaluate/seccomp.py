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
    # signals and process handles: a candidate may signal nothing, not even to probe a pid
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

_SONAME = "libseccomp.so.2"
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_BYTES = 8


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompUnavailable(Exception):
    """The kernel or the system library cannot provide the filter; the message says which."""


class SyscallFilter:
    """A compiled filter, built once and installed in any number of forked children."""

    def __init__(self, denied: tuple[str, ...] = DENIED_SYSCALLS) -> None:
        self._program = ctypes.create_string_buffer(_compile(denied))
        self._fprog = _SockFprog(len(self._program.raw) // _BPF_INSTRUCTION_BYTES, ctypes.addressof(self._program))
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl

    def install(self) -> None:
        """Install the filter on this process (needs no-new-privileges, which the fork server set)."""
        if self._prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"seccomp filter refused: {os.strerror(code)}")


def _compile(denied: tuple[str, ...]) -> bytes:
    """The BPF program for ``denied``, compiled by libseccomp and read back as bytes."""
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
        for syscall in denied:
            number = lib.seccomp_syscall_resolve_name(syscall.encode())
            if number < 0:
                continue  # not a system call on this architecture
            if lib.seccomp_rule_add_array(context, _SCMP_ACT_ERRNO | errno.EPERM, number, 0, None) != 0:
                raise SeccompUnavailable(f"libseccomp refused the rule for {syscall}")
        if lib.seccomp_export_bpf(context, program) != 0:
            raise SeccompUnavailable("libseccomp could not export the filter")
        os.lseek(program, 0, os.SEEK_SET)
        with open(program, "rb", closefd=False) as exported:
            return exported.read()
    finally:
        os.close(program)
        lib.seccomp_release(context)
