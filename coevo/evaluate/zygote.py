"""The fork server: a warm process that forks one fresh, isolated child per candidate.

Importing numpy and the task costs far more than a fork, so this process pays it once and every
candidate starts from a copy. It also holds the instances being evaluated (read once, at start),
so a child finds them in memory instead of receiving and unpickling them. It never runs
candidate code itself, and tells the parent each child's pid (so the parent can kill its group)
and exit status (so a verdict can name the signal). It is a child subreaper: anything a
candidate leaves behind is re-parented here and reaped.

A fork is cheap only while little memory is written afterwards: every page that this process or
a child writes after the fork is copied first. Hence ``gc.freeze``, the disabled threading
reset, and forking children in batches with no bookkeeping between the forks.

Run as ``python -m coevo.evaluate.zygote CONTROL_FD INSTANCES_FD MODULE CLASS``; INSTANCES_FD holds
the pickled instances.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pickle
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator

from coevo.evaluate.channel import MAX_FORK_BATCH, STATUS_RECORD
from coevo.evaluate.child import Prepared, run_child
from coevo.evaluate.isolation import NOBODY, become_subreaper, enter_empty_network_namespace, forbid_privilege_gain
from coevo.evaluate.policy import PRELOADED_MODULES

WORKDIR_ROOT = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else tempfile.gettempdir()
"""Where the candidates' working directories go: memory-backed where the machine has it. The fork
server creates and removes hundreds a second; on a journaling disk each pair costs it about 80 us of
CPU and 240 us of wall time, on tmpfs 20 us. Size does not matter: the audit hook refuses every
``open``, so a candidate writes nothing there."""


def main(control_fd: int, instances_fd: int, module_name: str, class_name: str) -> None:
    for name in PRELOADED_MODULES:
        importlib.import_module(name)
    task = getattr(importlib.import_module(module_name), class_name)()
    with os.fdopen(instances_fd, "rb") as instances:
        prepared = Prepared.build(task, pickle.load(instances))  # pickled by the trusted parent
    enter_empty_network_namespace()
    become_subreaper()
    forbid_privilege_gain()
    _skip_threading_reset_in_children()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)  # inherited by every child: these signals kill it
    server = _ForkServer(socket.socket(fileno=control_fd), prepared)
    gc.collect()
    gc.freeze()  # keep the preloaded heap shared copy-on-write with every child
    server.serve()


def _skip_threading_reset_in_children() -> None:
    """Make ``threading``'s after-fork hook a no-op (an at-fork hook cannot be unregistered).

    numpy.random imports threading, which then resets its bookkeeping in every forked child:
    about 100 copy-on-write page faults, a sixth of a trivial candidate's cost. There is nothing
    to reset: this process never starts a thread and a candidate cannot (RLIMIT_NPROC is 0).
    """
    hook = getattr(threading, "_after_fork", None)  # private: on a Python without it, children just pay
    if hook is not None:
        hook.__code__ = (lambda: None).__code__


class _ForkServer:
    """Forks children on request, reaps them on SIGCHLD, and reports both to the parent."""

    def __init__(self, control: socket.socket, prepared: Prepared) -> None:
        self.control, self.prepared = control, prepared
        self.children: dict[int, tuple[int, str]] = {}
        """pid -> (status pipe to the parent, working directory)."""
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.control.send(b"ready")
        try:
            while True:
                readable, _, _ = select.select([self.control, self.wake_read], [], [])
                if self.wake_read in readable:
                    os.read(self.wake_read, 4096)
                    self._reap()
                if self.control in readable:
                    message, fds, _, _ = socket.recv_fds(self.control, 16, 2 * MAX_FORK_BATCH)
                    if not message:
                        return
                    self._spawn(fds)
        finally:
            self._shut_down()

    def _spawn(self, fds: list[int]) -> None:
        """Fork one child per (channel, status pipe) pair received, all forks back to back.

        After a fork every page this process writes is copied, so the bookkeeping is done once
        for the whole batch, before and after the forks, not between them.
        """
        pairs = list(zip(fds[::2], fds[1::2]))
        workdirs = [_new_workdir() for _ in pairs]
        with _signals_as_children_need_them():
            pids = [self._fork(conn_fd, workdir) for (conn_fd, _), workdir in zip(pairs, workdirs)]
        for pid, (conn_fd, status_fd), workdir in zip(pids, pairs, workdirs):
            try:
                os.setpgid(pid, pid)  # also done by the child; whichever runs first closes the kill race
            except OSError:
                pass
            os.close(conn_fd)
            self.children[pid] = (status_fd, workdir)
            _report(status_fd, b"P", pid)
        self._reap()  # children that ended while SIGCHLD was not handled

    def _fork(self, conn_fd: int, workdir: str) -> int:
        pid = os.fork()
        if pid == 0:
            run_child(conn_fd, self.prepared, workdir)  # closes every descriptor but conn_fd
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
                status_fd, workdir = self.children.pop(pid)
                _kill_group(pid)  # nothing the candidate started may outlive it
                _remove_workdir(workdir)  # before reporting: "reaped" means "gone"
                _report(status_fd, b"X", status)
                os.close(status_fd)

    def _shut_down(self) -> None:
        """Kill every child still alive (running or spare), reap it, remove its directory."""
        for pid in self.children:
            _kill_group(pid)
        for pid, (status_fd, workdir) in self.children.items():
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            _remove_workdir(workdir)
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


def _new_workdir() -> str:
    workdir = tempfile.mkdtemp(prefix="coevo-candidate-", dir=WORKDIR_ROOT)
    if os.geteuid() == 0:
        os.chown(workdir, NOBODY, NOBODY)
    return workdir


def _remove_workdir(workdir: str) -> None:
    """Most candidates write nothing: one rmdir then, a full tree walk only when it is needed."""
    try:
        os.rmdir(workdir)
    except OSError:
        shutil.rmtree(workdir, ignore_errors=True)


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
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
