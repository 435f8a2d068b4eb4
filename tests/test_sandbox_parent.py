"""The trusted parent against whatever a child may write, and against a dying fork server.

Every decoding error must become ``valid=false`` with a reason, never an exception; frames are
bounded in size and depth; no amount of chatter moves a verdict past its limit; a dead fork
server is replaced, its in-flight candidates get a reason, and later ones get verdicts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import threading
import time

import psutil
import pytest

from coevo.evaluate import Evaluator, Limits
from coevo.evaluate.channel import MAX_DEPTH, MAX_FRAME_BYTES, frame
from coevo.evaluate.probe import ProbeTask
from coevo.evaluate.sandbox import _DEADLINE_GRACE_SECONDS, InstancePayload, Sandbox
from stand_in_child import supervise
from tasks import get_task

LIMITS = Limits(instance_seconds=1.0, candidate_seconds=2.0)
LOADED = frame({"loaded": True})


def raw(payload: str) -> bytes:
    """One frame around any text, well-formed JSON or not."""
    data = payload.encode()
    return struct.pack("<I", len(data)) + data


def nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


MALFORMED = {
    "not json": raw("{nope"),
    "not an object": raw("[1, 2]"),
    "index out of range": LOADED + frame({"index": 7, "solution": 0, "at": 0.0}),
    "index not an int": LOADED + frame({"index": 0.0, "solution": 0, "at": 0.0}),
    "index a bool": LOADED + frame({"index": False, "solution": 0, "at": 0.0}),
    "solution before loading": frame({"index": 0, "solution": 0, "at": 0.0}),
    "time not a number": LOADED + frame({"index": 0, "solution": 0, "at": "soon"}),
    "time too large for a float": LOADED + raw('{"index": 0, "solution": 0, "at": 1' + "0" * 400 + "}"),
    "integer beyond the digit limit": LOADED + raw('{"index": 0, "solution": ' + "9" * 5000 + ', "at": 0}'),
    "json nested past the recursion limit": LOADED + raw("[" * 100_000 + "]" * 100_000),
    "solution nested past the depth limit": LOADED + frame({"index": 0, "solution": nested(MAX_DEPTH + 1), "at": 0.0}),
    "loaded twice": LOADED + LOADED,
    "unknown message": LOADED + frame({"hello": 1}),
    "unknown tag": LOADED + frame({"index": 0, "solution": {"pickle": "x"}, "at": 0.0}),
    "malformed array": LOADED + frame({"index": 0, "solution": {"ndarray": ["<f8", [10**6], "AAAA"]}, "at": 0.0}),
    "object array": LOADED + frame({"index": 0, "solution": {"ndarray": ["|O", [1], "AAAAAAAAAAA="]}, "at": 0.0}),
    "structured dtype": LOADED + frame({"index": 0, "solution": {"ndarray": [[["a", "<f8"]], [1], "AAAAAAAAAAA="]}, "at": 0.0}),
    "dict body not pairs": LOADED + frame({"index": 0, "solution": {"dict": [1, 2]}, "at": 0.0}),
    "oversized frame header": struct.pack("<I", MAX_FRAME_BYTES + 1),
    "failure and index mixed with a solution": LOADED + frame({"index": 0, "error": "x", "solution": 0}),
}


@pytest.mark.parametrize("wire", MALFORMED.values(), ids=MALFORMED.keys())
def test_every_malformed_frame_is_a_verdict_with_a_reason(wire: bytes) -> None:
    outcome = supervise(wire, 2, LIMITS)
    assert outcome.failure is not None and outcome.failure.startswith(("the child sent", "the child reported")), outcome.failure
    assert outcome.solutions == ()


def test_a_well_formed_stream_still_passes() -> None:
    wire = LOADED + frame({"index": 0, "solution": nested(MAX_DEPTH - 1), "at": time.monotonic(), "done": True})
    outcome = supervise(wire, 1, LIMITS)
    assert outcome.failure is None and outcome.solutions == (nested(MAX_DEPTH - 1),)


def test_an_endless_frame_is_refused_at_the_frame_size_limit() -> None:
    def endless(end: socket.socket) -> None:
        end.sendall(LOADED + struct.pack("<I", MAX_FRAME_BYTES))
        while True:
            end.sendall(b" " * (1 << 16))

    outcome = supervise(endless, 2, LIMITS)
    assert outcome.failure is not None and outcome.failure.startswith("the child sent a malformed frame")


def test_a_stream_of_progress_cannot_move_the_verdict_past_the_candidate_limit() -> None:
    """Every frame is valid and moves the run forward, and they come faster than the parent reads:
    the read loop always has data, yet the verdict comes at the per-candidate deadline."""

    def progress(end: socket.socket) -> None:
        end.sendall(LOADED)
        for first in range(0, 10**8, 500):
            now = time.monotonic()
            end.sendall(b"".join(frame({"index": i, "solution": i, "at": now}) for i in range(first, first + 500)))

    start = time.monotonic()
    outcome = supervise(progress, 10**8, LIMITS)
    elapsed = time.monotonic() - start
    assert outcome.failure is not None and "per-candidate time limit" in outcome.failure, outcome.failure
    assert elapsed < LIMITS.candidate_seconds + _DEADLINE_GRACE_SECONDS + 0.5


def test_a_flood_of_frames_is_refused_at_once() -> None:
    def flood(end: socket.socket) -> None:
        while True:
            end.sendall(LOADED * 1000)

    start = time.monotonic()
    outcome = supervise(flood, 2, LIMITS)
    assert outcome.failure == "the child sent an unexpected message ['loaded']"
    assert time.monotonic() - start < LIMITS.instance_seconds


def _server_children(evaluator: Evaluator) -> list[psutil.Process]:
    spares = evaluator.sandbox.spare_pids()
    children = psutil.Process(evaluator.sandbox.server_pid).children()
    return [p for p in children if p.pid not in spares]


def test_a_killed_fork_server_is_replaced_and_its_candidates_get_a_reason() -> None:
    task = ProbeTask()
    sleeper = "import time\n\ndef pick(values):\n    time.sleep(3)\n    return 0\n"
    with Evaluator(task, limits=Limits(instance_seconds=5.0, candidate_seconds=8.0), workers=2) as evaluator:
        assert evaluator.evaluate(task.seed_code()).valid
        first_server = evaluator.sandbox.server_pid
        in_flight: list = []
        worker = threading.Thread(target=lambda: in_flight.append(evaluator.evaluate(sleeper)))
        worker.start()
        deadline = time.monotonic() + 5
        while not _server_children(evaluator) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(first_server, signal.SIGKILL)
        worker.join()
        assert not in_flight[0].valid and "fork server died" in in_flight[0].reason
        after = evaluator.evaluate(task.seed_code() + "# after the crash\n")
        assert after.valid, after.reason
        assert evaluator.sandbox.server_pid != first_server


def test_the_layers_greeting_is_read_and_missing_layers_are_named(caplog: pytest.LogCaptureFixture) -> None:
    with Evaluator(ProbeTask(), limits=LIMITS) as evaluator:
        assert evaluator.evaluate(ProbeTask().seed_code()).valid
        layers = evaluator.sandbox.layers
    assert set(layers) == {"network", "filesystem", "ipc", "own_uids", "pids", "seccomp", "paths"}
    missing = [name for name, held in layers.items() if held is not True]
    assert all(name in caplog.text for name in missing)
    assert json.dumps(layers)  # plain data, as the report and the CLI show it


def test_only_the_measured_layers_can_be_left_out() -> None:
    task = ProbeTask()
    payload = InstancePayload.of(task.groups("search")[0].instances)
    with pytest.raises(ValueError, match="can be left out"):
        Sandbox(task, payload, skipped_layers=frozenset({"network"}))
    with Sandbox(task, payload, skipped_layers=frozenset({"filesystem", "seccomp"})) as weakened:
        assert weakened.run(task.seed_code(), LIMITS).failure is None
        assert weakened.layers["filesystem"] is False and weakened.layers["seccomp"] == "left out"
        assert weakened.layers["network"] is True


def test_a_parent_holding_fd_numbers_past_1024_still_evaluates():
    """The parent waits on its children with poll(), which takes any fd number (select() stops at 1024)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip("the hard limit on open files is below what the test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with Evaluator("bpp_online", "val", limit=2) as evaluator:
            result = evaluator.evaluate(get_task("bpp_online").seed_code())
        assert result.valid, result.reason
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
