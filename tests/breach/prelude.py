# Shared by every breach case (tests/test_sandbox_breach.py prepends it): the case's attack()
# runs once, with full Python, and every attempt that is not refused is reported as a breach.
import ctypes
import os
import resource
import signal
import socket

LIBC = ctypes.CDLL(None, use_errno=True)
BREACHES = []


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


def found_state():
    """What a later candidate finds of an earlier one's (see leave_state): must be nothing."""
    places = (".", "/", "/tmp", "/dev/shm", "{HOME}", "{TMP}")
    traces = [place for place in places if os.path.exists(os.path.join(place, "{MARKER_NAME}"))]
    return traces + (["a message queue"] if LIBC.msgget(0x0C0E, 0) != -1 else [])


def pick(values):
    if not getattr(pick, "ran", False):
        pick.ran = True
        attack()
    if BREACHES:
        raise RuntimeError("breached: " + "; ".join(BREACHES))
    return 0
