# Shared by every breach case (tests/test_sandbox_breach.py prepends it): the case's attack()
# runs once, with full Python, and every attempt that is not refused is reported as a breach.
import ctypes
import os
import resource
import signal
import socket

LIBC = ctypes.CDLL(None, use_errno=True)
BREACHES = []
NOTE = 0x0C0E
"""A value an attacker leaves where the next candidate may look (see leave_state)."""


def attempt(name, action):
    """Run one attack; anything but an exception is a breach."""
    try:
        outcome = action()
    except Exception:
        return
    BREACHES.append(f"{name} -> {outcome!r}"[:160])


def call(name, result):
    """A libc call's result: anything but -1 (refused) is a breach."""
    if result != -1:
        BREACHES.append(f"{name} returned {result}")


def others():
    """Every pid this process might name but its own: the first few thousand (every process of a
    fresh PID namespace), those just after the fork server's (the drivers and spares it forked),
    the evaluator's and the sibling's."""
    server = os.getppid()  # 0 where the fork server is outside this process's PID namespace
    near = range(server, server + 512) if server else ()
    return [pid for pid in {*range(1, 1 << 12), *near, {PARENT_PID}, {SIBLING_PID}} if pid not in (0, os.getpid())]


def found_state():
    """What a later candidate finds of an earlier one's (see leave_state): must be nothing."""
    places = (".", "/", "/tmp", "/dev/shm", "{HOME}", "{TMP}")
    traces = [place for place in places if os.path.exists(os.path.join(place, "{MARKER_NAME}"))]
    if resource.getrlimit(resource.RLIMIT_MSGQUEUE)[0] == NOTE:
        traces.append("a note in its own limits")
    for pid in range(1, 64):
        try:
            if resource.prlimit(pid, resource.RLIMIT_MSGQUEUE)[0] == NOTE:
                traces.append(f"a note in the limits of pid {pid}")
        except OSError:
            pass
    return traces + (["a message queue"] if LIBC.msgget(NOTE, 0) != -1 else [])


def pick(values):
    if not getattr(pick, "ran", False):
        pick.ran = True
        attack()
    if BREACHES:
        raise RuntimeError("breached: " + "; ".join(BREACHES))
    return 0
