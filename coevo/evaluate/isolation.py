"""Kernel-level isolation: namespaces, an empty root, per-candidate users, limits, privileges.

These are the layers that hold even if candidate code escaped every Python-level guard: the
kernel enforces them on the process, whatever code it runs. The fork server enters the
namespaces once (``confine_server``); every child then only changes its user and limits, which
costs a few system calls, not a namespace each.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import math
import os
import posix
import resource
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

CANDIDATE_UID_BASE = 2_000_000_000
"""A candidate runs as uid (and gid) ``CANDIDATE_UID_BASE +`` its number among the fork server's
children: no other live process has that uid, so no other process is the candidate's to signal
or trace, sibling candidates included. Another fork server's candidates may have the same
numbers, but in mount, IPC and network namespaces of their own and each in a PID namespace of its
own, none can name or reach the other."""
_CANDIDATE_UIDS = 1 << 30
"""Numbers wrap here, which keeps every candidate uid clear of uid -1."""
MAX_OPEN_FILES = 32
_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_SYS_CLONE = 56
_SYS_PIVOT_ROOT = 155
_SYS_CAPSET = 126
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_ROOT_MOUNT_POINTS = ("/tmp", "/mnt", "/dev")
"""Where the empty root is first mounted (inside the private namespace, so the host sees nothing)."""
NEUTRAL_MOUNT_POINTS = ("/mnt", "/tmp")
"""Where ``mount_under_neutral_names`` mounts its tmpfs, hiding what is there from the fork server
until it enters its empty root: the first that exists (a task loaded from a file is more often
under /tmp; and not /dev, whose /dev/null the fork server still opens)."""
_HOST_PATH_ATTRIBUTES = ("executable", "_base_executable", "prefix", "exec_prefix", "base_prefix", "base_exec_prefix",
                         "_stdlib_dir")  # fmt: skip
_LIBC = ctypes.CDLL(None, use_errno=True)
_PYTHON = ctypes.pythonapi


@dataclass(frozen=True)
class Confinement:
    """Which kernel layers the fork server obtained; every child inherits them."""

    network: bool
    """An empty network namespace: no interface is up, not even loopback."""
    filesystem: bool
    """A private mount namespace whose root is an empty, read-only tmpfs."""
    ipc: bool
    """A private IPC namespace: no System V or POSIX IPC object of the host is reachable."""
    own_uids: bool
    """Each child gets a uid of its own (needs root; in a user namespace children share one)."""
    pids: bool
    """Each child is alone in a PID namespace of its own (``fork_alone``): a candidate can name
    no process but itself, and nothing of its namespace outlives it."""

    def missing(self) -> list[str]:
        return [name for name, held in vars(self).items() if not held]


def confine_server(filesystem: bool = True, own_uids: bool = True, pids: bool = True) -> Confinement:
    """Enter private network, mount and IPC namespaces and pivot into an empty root.

    As root this needs no user namespace, and children can later take uids of their own. Without
    root, a user namespace maps this user to root inside it (where the kernel allows unprivileged
    user namespaces); children then share that one uid and lose their capabilities instead.
    ``filesystem=False``, ``own_uids=False`` and ``pids=False`` leave those layers out, only to
    measure their cost or test the others alone. Where the kernel refuses PID namespaces (some
    containers), children are forked without one.
    """
    flags = _CLONE_NEWIPC | _CLONE_NEWNET | (_CLONE_NEWNS if filesystem else 0)
    root = host_root() and own_uids
    if not root:
        uid, gid = os.geteuid(), os.getegid()
        if _LIBC.unshare(flags | _CLONE_NEWUSER) != 0:
            return Confinement(network=False, filesystem=False, ipc=False, own_uids=False, pids=False)
        _map_ids(uid, gid)
    elif _LIBC.unshare(flags) != 0:
        network = _LIBC.unshare(_CLONE_NEWNET) == 0
        return Confinement(network=network, filesystem=False, ipc=False, own_uids=True, pids=pids and _can_fork_alone())
    held = filesystem and _pivot_into_empty_root()
    return Confinement(network=True, filesystem=held, ipc=True, own_uids=root, pids=pids and _can_fork_alone())


def fork_alone() -> int:
    """``os.fork``, but the child is the first and only process of a PID namespace of its own.

    The child is that namespace's init (pid 1 there; its parent is pid 0): it can name no other
    process, so no signal, limit, priority or affinity of another process is within its reach,
    and when it ends the kernel ends the namespace, so nothing in it survives for the next
    candidate. The kernel also ignores signals from within the namespace that the child has no
    handler for: it cannot kill itself by a signal, nor does SIGXCPU stop it (SIGKILL at the
    hard CPU limit does).

    Python has no call for this (``os.fork`` cannot pass ``CLONE_NEWPID``, and a second
    ``unshare(CLONE_NEWPID)`` is refused), so the clone is made here, between the interpreter's
    own before- and after-fork steps, as ``os.fork`` makes its ``fork()``.
    """
    _PYTHON.PyOS_BeforeFork()
    pid = _LIBC.syscall(_SYS_CLONE, _CLONE_NEWPID | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        _PYTHON.PyOS_AfterFork_Child()
        return 0
    code = ctypes.get_errno()
    _PYTHON.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(code, f"could not fork into a PID namespace of its own: {os.strerror(code)}")
    return pid


def own_pid_namespace() -> int | None:
    """This process's PID namespace, open (for ``candidate_forker``), or None where /proc cannot show it."""
    try:
        return os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def candidate_forker(own_namespace: int | None, alone: bool) -> Callable[[], int]:
    """How the fork server forks a candidate's child: ``os.fork``, or where ``alone``, a fork that
    makes the child alone in a PID namespace of its own (``fork_alone``'s promise).

    Where this process may hand its children back to its own PID namespace (``own_namespace``: an
    open ``/proc/self/ns/pid``, taken before the empty root; None where there was none), that fork
    is ``os.fork`` between two calls: ``unshare(CLONE_NEWPID)`` makes the next child the init of a
    new namespace, and ``setns`` back to this process's own lets the next fork make a new one again
    (and a driver's none). This needs the machine's root (``setns`` asks for CAP_SYS_ADMIN over the
    namespace this process is in); elsewhere it is ``fork_alone``. ``os.fork`` does the
    interpreter's after-fork steps itself: through ``ctypes`` they cost every child some fifty more
    copied pages of the fork server's memory.
    """
    # setns into the namespace this process is in changes nothing: it only tests the permission.
    if alone and own_namespace is not None and _LIBC.setns(own_namespace, _CLONE_NEWPID) == 0:
        return functools.partial(_fork_unshared, own_namespace)
    if own_namespace is not None:
        os.close(own_namespace)
    return fork_alone if alone else os.fork


def _fork_unshared(own_namespace: int) -> int:
    if _LIBC.unshare(_CLONE_NEWPID) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"could not make a PID namespace for the next child: {os.strerror(code)}")
    try:
        pid = os.fork()
    except OSError:
        _children_in(own_namespace)
        raise
    if pid:
        _children_in(own_namespace)
    return pid


def _children_in(namespace: int) -> None:
    """Fork this process's next children into ``namespace`` (``setns``)."""
    if _LIBC.setns(namespace, _CLONE_NEWPID) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"could not return to the fork server's PID namespace: {os.strerror(code)}")


def _can_fork_alone() -> bool:
    """Whether the kernel gives this process's children PID namespaces of their own."""
    try:
        pid = fork_alone()
    except OSError:
        return False
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return True


def host_root() -> bool:
    """Whether this process is the machine's root (uid 0 of the initial user namespace), not the
    root of a user namespace, who could not give children uids of their own."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as mapping:
            return mapping.read().split() == ["0", "0", str(2**32 - 1)]
    except OSError:
        return True  # no /proc to ask: uid 0 it is


def mount_under_neutral_names(directories: Mapping[str, str]) -> str | None:
    """Enter a mount namespace of its own (without root, in a user namespace of its own) and show
    each directory of ``directories`` (name -> path) at ``ROOT/name``, bind-mounted on a fresh
    tmpfs at ROOT (one of ``NEUTRAL_MOUNT_POINTS``): ROOT, or None where that cannot be done.
    The host sees none of it."""
    point = next((path for path in NEUTRAL_MOUNT_POINTS if os.path.isdir(path)), None)
    if point is None or any(os.path.commonpath([point, path]) == point for path in directories.values()):
        return None  # the tmpfs would hide a directory it must show
    if host_root():
        entered = _LIBC.unshare(_CLONE_NEWNS) == 0
    else:
        uid, gid = os.geteuid(), os.getegid()
        entered = _LIBC.unshare(_CLONE_NEWNS | _CLONE_NEWUSER) == 0
        if entered:
            _map_ids(uid, gid)
    if not entered or _mount(None, "/", None, _MS_REC | _MS_PRIVATE) != 0:
        return None
    if _mount("coevo-paths", point, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64k,mode=0755") != 0:
        return None
    for name, path in directories.items():
        os.makedirs(os.path.join(point, name))
        if _mount(path, os.path.join(point, name), None, _MS_BIND | _MS_REC) != 0:
            return None
    return point


def _map_ids(uid: int, gid: int) -> None:
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                       ("/proc/self/gid_map", f"0 {gid} 1")):  # fmt: skip
        with open(path, "w") as file:
            file.write(text)


def _pivot_into_empty_root() -> bool:
    """Make an empty, read-only tmpfs this process's root; False (and the old root kept) if refused."""
    if _mount(None, "/", None, _MS_REC | _MS_PRIVATE) != 0:
        return False
    point = next((path for path in _ROOT_MOUNT_POINTS if os.path.isdir(path)), None)
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if point is None or _mount("coevo-root", point, "tmpfs", flags, "size=4k,nr_inodes=8,mode=0755") != 0:
        return False
    old_root = os.path.join(point, "old-root")
    os.mkdir(old_root)
    if _LIBC.syscall(_SYS_PIVOT_ROOT, point.encode(), old_root.encode()) != 0:
        _LIBC.umount2(point.encode(), _MNT_DETACH)
        return False
    os.chdir("/")
    if _LIBC.umount2(b"/old-root", _MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "could not detach the old root")
    os.rmdir("/old-root")
    if _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags) != 0:
        raise OSError(ctypes.get_errno(), "could not make the empty root read-only")
    _forget_host_paths()
    return True


def _forget_host_paths() -> None:
    """Empty what ``sys`` says about the files this process started from (the checkout, the
    virtual environment, the working directory, the interpreter): under the empty root those
    paths lead nowhere, and a child should not learn them. Every module is already loaded."""
    for listing in (sys.path, sys.argv, getattr(sys, "orig_argv", [])):
        listing.clear()
    sys.path_importer_cache.clear()
    for name in _HOST_PATH_ATTRIBUTES:
        if hasattr(sys, name):
            setattr(sys, name, "")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> int:
    encode = lambda text: text.encode() if text is not None else None  # noqa: E731
    return _LIBC.mount(encode(source), encode(target), encode(fstype), flags, encode(data))


INHERITED_VARIABLES: frozenset[str] = frozenset({"OPENBLAS_CORETYPE", "MKL_CBWR"})
"""The parent's variables the fork server is started with, by exact name (never by prefix): the
numeric libraries' choice of kernels, so that a child computes as the parent would. No locale and
no time zone: a heuristic needs neither, and once the C library has read one it keeps a copy of
the value (the TZ string, a locale's name) that nothing here can erase."""


def inherited_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that ``INHERITED_VARIABLES`` names; no other value is copied,
    so none is ever in the fork server's memory for a child to find."""
    return {name: environ[name] for name in INHERITED_VARIABLES if name in environ}


def erase_environment() -> None:
    """Empty the environment, including the copy the kernel placed on the stack at exec and the
    copies Python made of each value at start-up (``posix.environ``).

    Unsetting the variables only unlinks them: their original text stays in memory (and in
    /proc/PID/environ), and a freed Python object keeps its text too, where code with raw memory
    access could still read it. Zeroing both leaves nothing for any child to inherit.
    """
    environ = ctypes.POINTER(ctypes.c_void_p).in_dll(_LIBC, "environ")
    addresses = []
    while environ[len(addresses)]:
        addresses.append(environ[len(addresses)])
    for value in posix.environ.values():
        if len(value) > 1:  # a shorter bytes object is one of the interpreter's shared constants
            ctypes.memset(ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p), 0, len(value))
    os.environ.clear()
    for address in addresses:
        ctypes.memset(address, 0, _LIBC.strlen(ctypes.c_void_p(address)))


def become_subreaper() -> None:
    """Orphans of our children are re-parented to us, so we can reap them."""
    _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent() -> None:
    """Die with the process that forked this one, and refuse to be traced or dumped (a candidate's
    trusted driver: nothing may outlive the fork server, and no candidate may read its memory)."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _LIBC.prctl(_PR_SET_DUMPABLE, 0)


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
    cannot be cleared); it is also what lets an unprivileged process install a seccomp filter.
    Set once in the fork server, so no child pays for a prctl through ctypes."""
    _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def drop_privileges(own_uid: bool, number: int) -> None:
    """Become a user no other process is (``number``: this child's among the fork server's), or,
    in a user namespace, drop every capability; then die with the fork server and refuse to be
    traced or dumped."""
    if own_uid:
        uid = CANDIDATE_UID_BASE + number % _CANDIDATE_UIDS
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    else:
        _drop_capabilities()
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    _LIBC.prctl(_PR_SET_DUMPABLE, 0)


def _drop_capabilities() -> None:
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: empty, for both 32-bit halves
    if _LIBC.syscall(_SYS_CAPSET, header, data) != 0 and ctypes.get_errno() != errno.EPERM:
        raise OSError(ctypes.get_errno(), "could not drop capabilities")
