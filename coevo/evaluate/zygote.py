"""The fork server: a warm process that forks one fresh, isolated child per candidate.

Importing numpy and the task costs far more than a fork, so this process pays it once and every
candidate starts from a copy. It never runs candidate code itself, holds no instances, and
tells the parent each child's pid (so the parent can kill its group) and exit status (so a
verdict can name the signal). It is a child subreaper: anything a candidate leaves behind is
re-parented here and reaped. Run as ``python -m coevo.evaluate.zygote FD MODULE CLASS``.
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import shutil
import signal
import socket
import sys
import tempfile

from coevo.evaluate.channel import STATUS_RECORD
from coevo.evaluate.child import run_child
from coevo.evaluate.guard import Guard
from coevo.evaluate.isolation import NOBODY, become_subreaper, enter_empty_network_namespace
from coevo.evaluate.policy import PRELOADED_MODULES
from tasks.base import Task


def main(control_fd: int, module_name: str, class_name: str) -> None:
    for name in PRELOADED_MODULES:
        importlib.import_module(name)
    task = getattr(importlib.import_module(module_name), class_name)()
    guard = Guard()
    enter_empty_network_namespace()
    become_subreaper()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    control = socket.socket(fileno=control_fd)
    gc.freeze()  # keep the preloaded heap shared copy-on-write with every child
    control.send(b"ready")
    children: dict[int, tuple[int, str]] = {}
    try:
        while True:
            readable, _, _ = select.select([control, wake_read], [], [])
            if wake_read in readable:
                os.read(wake_read, 4096)
                _reap(children)
            if control in readable:
                message, fds, _, _ = socket.recv_fds(control, 16, 2)
                if not message:
                    return
                _spawn(fds, task, guard, children)
    finally:
        _shut_down(children)


def _spawn(fds: list[int], task: Task, guard: Guard, children: dict[int, tuple[int, str]]) -> None:
    conn_fd, status_fd = fds
    workdir = tempfile.mkdtemp(prefix="coevo-candidate-")
    if os.geteuid() == 0:
        os.chown(workdir, NOBODY, NOBODY)
    pid = os.fork()
    if pid == 0:
        run_child(conn_fd, task, guard, workdir)  # closes every inherited descriptor but conn_fd
    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first closes the kill race
    except OSError:
        pass
    os.close(conn_fd)
    children[pid] = (status_fd, workdir)
    _report(status_fd, b"P", pid)


def _reap(children: dict[int, tuple[int, str]]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            status_fd, workdir = children.pop(pid)
            _kill_group(pid)  # nothing the candidate started may outlive it
            _remove_workdir(workdir)  # before reporting: "reaped" means "gone"
            _report(status_fd, b"X", status)
            os.close(status_fd)


def _shut_down(children: dict[int, tuple[int, str]]) -> None:
    """Kill every child still alive (running or spare), reap it, remove its directory."""
    for pid in children:
        _kill_group(pid)
    for pid, (status_fd, workdir) in children.items():
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        _remove_workdir(workdir)
        os.close(status_fd)


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
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
