"""The fork server: a warm process that forks one fresh, isolated child per candidate.

It also forks the trusted driver processes (``driver.py``), on request, which run the task's
drivers against the children; they are forked before any candidate code runs anywhere.

Importing numpy and the task costs far more than a fork, so this process pays it once and every
candidate starts from a copy. It also holds the instances being evaluated (read once, at start),
so a child finds them in memory instead of receiving and unpickling them. It never runs
candidate code itself, and tells the parent each child's pid (so the parent can kill its group)
and exit status (so a verdict can name the signal). Each candidate's child is alone in a PID
namespace of its own (``isolation.candidate_forker``), which ends with it; anything else left behind
is re-parented and reaped here (it is a child subreaper).

Once everything is loaded it confines itself, and so every child (``isolation.confine_server``):
private network, mount and IPC namespaces with an empty, read-only root (so a candidate sees no
file at all and can write none: there is nothing to clean up after it), no environment variables,
and a seccomp filter (``seccomp.py``) refusing the system calls a heuristic never needs; each
child adds a filter of its own that refuses it any call on another process. The parent hears
which layers it got in the greeting.

A fork is cheap only while little memory is written afterwards: every page that this process or
a child writes after the fork is copied first. Hence ``gc.freeze``, the disabled threading
reset, and forking children in batches with no bookkeeping between the forks.

Started through ``relocate`` (which runs the interpreter from neutral paths) as
``python -m coevo.evaluate.zygote CONTROL_FD INSTANCES_FD TASK DEFINITION GUARDS SKIPPED``;
INSTANCES_FD holds the pickled instances; DEFINITION is the ``definition_hash`` of the task the
parent holds (on any other definition the fork server exits before its greeting); GUARDS is
``on``, or ``off`` to test the kernel layers alone; SKIPPED is ``-``, or kernel layers to leave
out (``filesystem,seccomp,own_uids,pids``), only to measure what each costs or to test the
others alone.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import pickle
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator

from coevo.evaluate.channel import MAX_FORK_BATCH, STATUS_RECORD
from coevo.evaluate.child import ChildSetup, Prepared, run_child
from coevo.evaluate.driver import run_driver
from coevo.evaluate.isolation import (
    become_subreaper,
    candidate_forker,
    confine_server,
    erase_environment,
    forbid_privilege_gain,
    own_pid_namespace,
)
from coevo.evaluate.policy import PRELOADED_MODULES
from coevo.evaluate.relocate import relocated
from coevo.evaluate.seccomp import (
    DENIED_ARGUMENTS,
    DENIED_SYSCALLS,
    SeccompUnavailable,
    SyscallFilter,
    load_libseccomp,
    only_pid_namespaces,
    refused_on_other_processes,
)
from tasks import definition_hash, get_task

SERVER_SYSCALLS = frozenset({"fork", "clone", "clone3", "kill", "tgkill", "unshare", "setns"})
"""What the fork server itself still needs of the denied calls: forking children, killing them,
and making each candidate's PID namespace (``unshare`` and ``setns``, for nothing but a PID
namespace: ``only_pid_namespaces``)."""
CHILD_SYSCALLS = ("fork", "clone", "clone3", "unshare", "setns")
"""Of ``SERVER_SYSCALLS``, what each child's own filter refuses whatever the arguments (kill and
tgkill it refuses on any process but the child itself: ``refused_on_other_processes``)."""


def main(control_fd: int, instances_fd: int, task_spec: str, definition: str, guards: str, skipped: str) -> None:
    paths = relocated() or "the interpreter runs from the machine's paths"
    for name in PRELOADED_MODULES:
        importlib.import_module(name)
    task = get_task(task_spec)
    if definition_hash(type(task)) != definition:
        raise SystemExit(f"{task_spec} is not the definition the evaluator holds (its file changed since)")
    with os.fdopen(instances_fd, "rb") as instances:
        prepared = Prepared.build(task, pickle.load(instances), python_guards=guards == "on")
    stdio = os.open(os.devnull, os.O_RDWR)  # the children's stdin/out/err: their root has no /dev
    unavailable = _load_libseccomp()  # before the empty root: libseccomp is loaded from disk
    left_out = frozenset(skipped.split(",")) - {"-"}
    pid_namespace = own_pid_namespace()  # before the empty root, which has no /proc
    confinement = confine_server(*(layer not in left_out for layer in ("filesystem", "own_uids", "pids")))
    filters = unavailable or _compile_filters(confinement.pids)  # before the filter refuses memfd_create
    erase_environment()
    become_subreaper()
    forbid_privilege_gain()
    seccomp = "left out" if "seccomp" in left_out else _confine_system_calls(filters)
    layers = {**vars(confinement), "seccomp": seccomp, "paths": paths}
    _skip_threading_reset_in_children()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)  # inherited by every child: these signals kill it
    child_filter = filters[1] if layers["seccomp"] is True and not isinstance(filters, str) else None
    setup = ChildSetup(stdio, confinement.own_uids, child_filter)
    if prepared.guard is not None:
        prepared.guard.patch_classes()  # last: no code of this process's own runs with them afterwards
    fork_child = candidate_forker(pid_namespace, alone=confinement.pids)
    server = _ForkServer(socket.socket(fileno=control_fd), prepared, setup, fork_child)
    gc.collect()
    gc.freeze()  # keep the preloaded heap shared copy-on-write with every child
    server.serve(json.dumps(layers).encode())


def _load_libseccomp() -> str | None:
    """Why libseccomp cannot be loaded, or None once it is."""
    try:
        load_libseccomp()
    except SeccompUnavailable as error:
        return str(error)
    return None


def _compile_filters(alone_in_pid_namespace: bool) -> tuple[SyscallFilter, SyscallFilter] | str:
    """The fork server's filter and the per-child one, or why libseccomp cannot build them.

    The fork server keeps only what it needs to fork and kill children; each child adds a filter
    that refuses it those calls, and any call that names another process
    (``ChildSetup.syscall_filter``), whatever its uid. The calls refused by their other arguments
    are in the fork server's filter, which every child inherits.
    """
    try:
        denied = tuple(name for name in DENIED_SYSCALLS if name not in SERVER_SYSCALLS)
        server = SyscallFilter(denied, DENIED_ARGUMENTS + only_pid_namespaces())
        return server, SyscallFilter(CHILD_SYSCALLS, refused_on_other_processes(alone_in_pid_namespace))
    except SeccompUnavailable as error:
        return str(error)


def _confine_system_calls(filters: tuple[SyscallFilter, SyscallFilter] | str) -> bool | str:
    """Install the fork server's filter, which every child inherits: True, or why not."""
    if isinstance(filters, str):
        return filters
    try:
        filters[0].install()
    except OSError as error:
        return str(error)
    return True


def _skip_threading_reset_in_children() -> None:
    """Make ``threading``'s after-fork hook a no-op (an at-fork hook cannot be unregistered).

    numpy.random imports threading, which then resets its bookkeeping in every forked child: a burst
    of copy-on-write page faults, a visible share of a trivial candidate's cost. There is nothing
    to reset: this process never starts a thread and a candidate cannot (RLIMIT_NPROC is 0).
    """
    hook = getattr(threading, "_after_fork", None)  # private: on a Python without it, children just pay
    if hook is not None:
        hook.__code__ = (lambda: None).__code__


class _ForkServer:
    """Forks children on request, reaps them on SIGCHLD, and reports both to the parent."""

    def __init__(
        self, control: socket.socket, prepared: Prepared, setup: ChildSetup, fork_child: Callable[[], int]
    ) -> None:
        self.control, self.prepared, self.setup = control, prepared, setup
        self.fork_child = fork_child
        """How a candidate's child is forked: alone in a PID namespace of its own where the kernel allows."""
        self.children: dict[int, int] = {}
        """pid -> status pipe to the parent."""
        self.forked = 0
        """Children forked so far: each child's number, for its uid."""
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)

    def serve(self, layers: bytes) -> None:
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.control.send(b"ready" + layers)
        poller = select.poll()  # not select(): the control socket keeps the parent's fd number, any size
        poller.register(self.control, select.POLLIN)
        poller.register(self.wake_read, select.POLLIN)
        try:
            while True:
                readable = {fd for fd, _ in poller.poll()}
                if self.wake_read in readable:
                    os.read(self.wake_read, 4096)
                    self._reap()
                if self.control.fileno() in readable:
                    message, fds, _, _ = socket.recv_fds(self.control, 16, 2 * MAX_FORK_BATCH)
                    if not message:
                        return
                    self._spawn(message, fds)
        finally:
            self._shut_down()

    def _spawn(self, kind: bytes, fds: list[int]) -> None:
        """Fork one child or driver per (channel, status pipe) received, all forks back to back.

        After a fork every page this process writes is copied, so the bookkeeping is done once
        for the whole batch, before and after the forks, not between them.
        """
        groups = [fds[start : start + 2] for start in range(0, len(fds), 2)]
        with _signals_as_children_need_them():
            pids = [self._fork(kind, group, self.forked + number) for number, group in enumerate(groups, 1)]
        self.forked += len(groups)
        for pid, (conn_fd, status_fd) in zip(pids, groups):
            try:
                os.setpgid(pid, pid)  # also done by the child; whichever runs first closes the kill race
            except OSError:
                pass
            os.close(conn_fd)
            self.children[pid] = status_fd
            _report(status_fd, b"P", pid)
        self._reap()  # children that ended while SIGCHLD was not handled

    def _fork(self, kind: bytes, fds: list[int], number: int) -> int:
        candidate = kind == b"fork"
        pid = self.fork_child() if candidate else os.fork()
        if pid == 0:  # each closes every descriptor but its own
            if candidate:
                run_child(fds[0], self.prepared, self.setup, number)
            run_driver(fds[0], self.prepared, self.setup)
        return pid

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:
                status_fd = self.children.pop(pid)
                _kill_group(pid)  # nothing the candidate started may outlive it
                _report(status_fd, b"X", status)
                os.close(status_fd)

    def _shut_down(self) -> None:
        """Kill every child still alive (running or spare) and reap it."""
        for pid in self.children:
            _kill_group(pid)
        for pid, status_fd in self.children.items():
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            os.close(status_fd)


@contextlib.contextmanager
def _signals_as_children_need_them() -> Iterator[None]:
    """Default SIGCHLD and no wake-up pipe while forking: a candidate must inherit neither.

    Resetting them here once per batch, rather than in every child, spares each child the
    pages that the signal module would otherwise copy.
    """
    handler = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    wake_fd = signal.set_wakeup_fd(-1)
    try:
        yield
    finally:
        signal.set_wakeup_fd(wake_fd)
        signal.signal(signal.SIGCHLD, handler)


def _report(status_fd: int, kind: bytes, value: int) -> None:
    try:
        os.write(status_fd, STATUS_RECORD.pack(kind, value))
    except BrokenPipeError:
        pass  # the parent gave up on this candidate


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:7])
