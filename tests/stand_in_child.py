"""A stand-in for a driver and its child, to test the parent's supervisor on any byte stream.

The supervisor sees only the driver's channel and the fork server's status records of the
child, so a socket pair and a ``sleep`` process (what its kill hits) are enough to feed it
anything the channel could carry, however malformed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable

from coevo.evaluate.channel import STATUS_RECORD, frame
from coevo.evaluate.sandbox import Limits, SandboxResult, _Child, _Supervisor


def supervise(
    wire: bytes | Callable[[socket.socket], None], count: int, limits: Limits, started_ago: float = 0.0
) -> SandboxResult:
    """Supervise a child that sends ``wire`` (bytes sent at once, or a writer run in a thread)."""
    started = time.monotonic() - started_ago
    stand_in = subprocess.Popen(["sleep", "30"], start_new_session=True)
    parent_end, child_end = socket.socketpair()
    status_read, status_write = os.pipe()
    writer = None
    try:
        os.write(status_write, STATUS_RECORD.pack(b"P", stand_in.pid) + STATUS_RECORD.pack(b"X", 9))  # pid, killed
        if callable(wire):
            writer = threading.Thread(target=_until_closed, args=(wire, child_end), daemon=True)
            writer.start()
        else:
            child_end.sendall(wire)
        child = _Child(parent_end, status_read)
        try:
            return _Supervisor(parent_end, child, count, limits, started).run(b"")
        finally:
            child.close()  # as the sandbox does: a writer still flooding the channel now fails
    finally:
        if writer is not None:
            writer.join()
        child_end.close()
        os.close(status_write)
        stand_in.wait()


def supervise_late(messages: list[dict[str, object]], count: int, limits: Limits) -> SandboxResult:
    """Supervise a child whose messages were all sent before the parent looks at them, as when
    the parent wakes long after a deadline; the child's clock starts 10 s in the past."""
    started = time.monotonic() - 10.0
    wire = b"".join(
        frame({**message, "at": started + message["at"]} if "at" in message else message) for message in messages
    )
    return supervise(wire, count, limits, started_ago=10.0)


def _until_closed(write: Callable[[socket.socket], None], end: socket.socket) -> None:
    try:
        write(end)
    except OSError:
        pass  # the supervisor closed its end: the flood is over
