"""Assume the Python guards fall: the kernel layers alone must contain a candidate with full Python.

Every case in tests/breach/ runs with the guards off (real builtins, no static check, no audit
hook), so it has ``os``, ``ctypes`` and ``socket``. Each must be refused by the OS layer: the
candidate itself reports any attempt that was not refused, and this test checks from outside
that no file, socket, process or variable was reached, and that the next candidate finds
nothing of it. Every case runs in each of ``layerings.LAYERINGS``.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from coevo.evaluate import Evaluator, Limits
from coevo.evaluate.isolation import CANDIDATE_UID_BASE
from coevo.evaluate.probe import ProbeTask
from layerings import LAYERINGS, unguarded_evaluator
from tasks.references import DATA_DIR

BREACH_DIR = Path(__file__).with_name("breach")
CHECKOUT = Path(__file__).resolve().parents[1]
PRELUDE = (BREACH_DIR / "prelude.py").read_text()
LIMITS = Limits(instance_seconds=5.0, candidate_seconds=8.0, memory_mb=320)
SECRET_NAME, SECRET = "COEVO_BREACH_SECRET", uuid.uuid4().hex
SIBLING = "import time\n\ndef pick(values):\n    time.sleep(1.0 if values[0] == FIRST else 0)\n    return int(values.argmin())\n"
"""A normal candidate that runs alongside the attacker (it waits a second on the first instance)."""
DETECTOR = "def attack():\n    BREACHES.extend(found_state())\n"
_ARCH = re.compile(r"^# arch: (\S+)", re.MULTILINE)


def cases() -> list[pytest.param]:
    params = []
    for path in sorted(BREACH_DIR.glob("*.candidate")):
        code = path.read_text()
        arch = _ARCH.search(code)
        marks = [pytest.mark.skipif(platform.machine() != arch.group(1), reason=arch.group(0))] if arch else []
        params.append(pytest.param(code, id=path.stem, marks=marks))
    return params


@dataclass
class Host:
    """What a contained candidate must not reach: listeners, directories, this process."""

    tmp: Path
    marker_name: str
    tcp: socket.socket
    unix: socket.socket
    unix_path: Path

    def render(self, case: str, sibling_pid: int = 0) -> str:
        code = PRELUDE + "\n\n" + case
        for placeholder, value in {
            "{DATA_DIR}": DATA_DIR,
            "{MARKER_NAME}": self.marker_name,
            "{HOME}": Path.home(),
            "{TMP}": self.tmp,
            "{PORT}": self.tcp.getsockname()[1],
            "{UNIX_SOCKET}": self.unix_path,
            "{SECRET_NAME}": SECRET_NAME,
            "{SECRET}": SECRET,
            "{PARENT_PID}": os.getpid(),
            "{SIBLING_PID}": sibling_pid,
            "{CHECKOUT}": CHECKOUT,
            "{CWD}": Path.cwd(),
            "{PREFIX}": Path(sys.base_prefix).resolve(),
            "{VENV}": sys.prefix,
        }.items():
            code = code.replace(placeholder, str(value))
        return code

    def traces(self) -> list[str]:
        """Anything a candidate left or reached on this side."""
        places = [Path("/tmp"), Path("/dev/shm"), Path("/var/tmp"), Path.home(), self.tmp, Path("/")]
        found = [str(place / self.marker_name) for place in places if (place / self.marker_name).exists()]
        for name, listener in (("tcp", self.tcp), ("unix", self.unix)):
            listener.settimeout(0.05)
            try:
                listener.accept()[0].close()
                found.append(f"a {name} connection")
            except TimeoutError:
                pass
        return found


@pytest.fixture(scope="module", params=list(LAYERINGS))
def evaluator(request: pytest.FixtureRequest) -> Iterator[Evaluator]:
    os.environ[SECRET_NAME] = SECRET  # the evaluator's environment holds a secret
    try:
        with unguarded_evaluator(request.param, limits=LIMITS, workers=2) as unguarded:
            yield unguarded
    finally:
        del os.environ[SECRET_NAME]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    unix_path = tmp_path / "listener.sock"
    with socket.create_server(("127.0.0.1", 0)) as tcp, socket.socket(socket.AF_UNIX) as unix:
        unix.bind(str(unix_path))
        unix.listen()
        yield Host(tmp_path, f"coevo-breach-{uuid.uuid4().hex}", tcp, unix, unix_path)


def candidates_of(evaluator: Evaluator) -> list[psutil.Process]:
    spares = evaluator.sandbox.spare_pids()
    server = psutil.Process(evaluator.sandbox.server_pid)
    processes = server.children(recursive=True)
    return [child for child in processes if child.pid not in spares]


def test_the_guards_are_really_off(evaluator: Evaluator) -> None:
    """The switch works: a candidate has the real os module and runs as a uid of its own."""
    own_uid = f"os.getuid() > {CANDIDATE_UID_BASE}" if evaluator.sandbox.layers["own_uids"] else "True"
    code = f"import os\n\ndef pick(values):\n    assert {own_uid} and open is __builtins__.open\n    return 0\n"
    result = evaluator.evaluate(code)
    assert result.valid, result.reason
    with Evaluator(ProbeTask(), limits=LIMITS, static_check=False) as guarded:
        assert "refused" in (guarded.evaluate(code).reason or "")


def test_the_fork_server_holds_every_layer_and_an_empty_environment(evaluator: Evaluator) -> None:
    assert set(evaluator.sandbox.layers) == {"network", "filesystem", "ipc", "own_uids", "pids", "seccomp", "paths"}
    assert psutil.Process(evaluator.sandbox.server_pid).environ() == {}


@pytest.mark.parametrize("case", cases())
def test_breach_is_contained_by_the_kernel_layers(case: str, evaluator: Evaluator, host: Host) -> None:
    server = evaluator.sandbox.server_pid
    baseline = evaluator.evaluate(ProbeTask().seed_code())
    sibling_result: list = []
    first = float(ProbeTask().groups("search")[0].instances[0]["values"][0])
    sibling_code = f"FIRST = {first!r}\n{SIBLING}# {host.marker_name}\n"  # a distinct source: no cached verdict
    sibling = threading.Thread(target=lambda: sibling_result.append(evaluator.evaluate(sibling_code)))
    sibling.start()
    try:
        sibling_pid = _wait_for_candidate(evaluator)
        result = evaluator.evaluate(host.render(case, sibling_pid))
    finally:
        sibling.join()
    assert result.valid, result.reason  # the candidate found every attempt refused
    assert sibling_result[0].valid and sibling_result[0].per_instance == baseline.per_instance
    assert host.traces() == []
    assert evaluator.sandbox.server_pid == server and psutil.pid_exists(server)
    follow_up = evaluator.evaluate(host.render(DETECTOR))
    assert follow_up.valid, follow_up.reason  # nothing of the attacker is left for the next candidate
    assert candidates_of(evaluator) == [] or _gone_soon(evaluator)


def _wait_for_candidate(evaluator: Evaluator, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = candidates_of(evaluator) if evaluator.sandbox.server_pid else []
        if running:
            return running[0].pid
        time.sleep(0.01)
    raise AssertionError("the sibling candidate did not start")


def _gone_soon(evaluator: Evaluator, grace: float = 1.0) -> bool:
    deadline = time.monotonic() + grace
    while candidates_of(evaluator) and time.monotonic() < deadline:
        time.sleep(0.01)
    return candidates_of(evaluator) == []


CROSS_ATTACKERS = ["leave_state", "signal_processes", "signal_by_file_owner", "write_files", "spawn_processes", "fill_disk"]


@pytest.mark.parametrize("attacker_first", [True, False], ids=["attacker-first", "normal-first"])
@pytest.mark.parametrize("name", CROSS_ATTACKERS)
def test_an_attacker_does_not_change_the_candidate_beside_it(
    name: str, attacker_first: bool, evaluator: Evaluator, host: Host
) -> None:
    normal = ProbeTask().seed_code()
    alone = evaluator.evaluate(normal + f"# alone {host.marker_name}\n")
    attacker = host.render((BREACH_DIR / f"{name}.candidate").read_text())
    beside = normal + f"# beside {host.marker_name}\n"  # a distinct source: judged afresh, not cached
    batch = [attacker, beside] if attacker_first else [beside, attacker]
    results = dict(zip(batch, evaluator.evaluate_many(batch)))
    assert results[beside].valid and results[beside].per_instance == alone.per_instance
    assert host.traces() == []
