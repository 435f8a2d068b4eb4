"""The sandbox against the hostile corpus in tests/hostile/, and its isolation observed from outside.

Every corpus case must end ``valid=false`` with its expected reason, within its time limit plus
a small margin, leave no process, file or temporary directory behind, reach no listener, and
leave the evaluator able to judge the next (normal) candidate. Every case also runs with the
Python guards off, in root's layering and in a user's (``layerings.py``): whatever it then does,
the kernel layers alone must hold all of that, and a verdict it earns is what its answers earn.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from coevo.evaluate import EvalResult, Evaluator, Limits
from coevo.evaluate.isolation import CANDIDATE_UID_BASE, candidate_forker, own_pid_namespace
from coevo.evaluate.probe import ProbeTask
from layerings import unguarded_evaluator
from pid_namespace import namespace_pids
from tasks.references import DATA_DIR

CORPUS_DIR = Path(__file__).with_name("hostile")
LIMITS = Limits(instance_seconds=2.0, candidate_seconds=3.0, memory_mb=320)
MARGIN_SECONDS = 2.0
TRIVIAL = "def pick(values):\n    return 0\n"
_HEADER = re.compile(r"^# (expect|expect-runtime): (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Case:
    name: str
    layer: str
    """"static": the normal evaluator; "runtime": static check skipped, run-time layers alone."""
    expect: str
    code: str


def load_corpus() -> list[Case]:
    cases = []
    for path in sorted(CORPUS_DIR.glob("*.candidate")):
        code = path.read_text()
        headers = dict(_HEADER.findall(code))
        cases.append(Case(path.stem, "static", headers["expect"], code))
        if "expect-runtime" in headers:
            cases.append(Case(path.stem, "runtime", headers["expect-runtime"], code))
    return cases


CORPUS = load_corpus()


@dataclass
class Traps:
    """Things a contained candidate must not touch: files, a directory, a live listener."""

    marker: Path
    escaped_marker: Path
    victim: Path
    victim_dir: Path
    listener: socket.socket

    def render(self, code: str) -> str:
        for placeholder, value in {
            "{MARKER}": self.marker,
            "{MARKER_NAME}": self.escaped_marker.name,
            "{VICTIM}": self.victim,
            "{VICTIM_DIR}": self.victim_dir,
            "{PORT}": self.listener.getsockname()[1],
            "{DATA_DIR}": DATA_DIR,
        }.items():
            code = code.replace(placeholder, str(value))
        return code

    def listener_received_nothing(self) -> bool:
        self.listener.settimeout(0.05)
        try:
            self.listener.accept()[0].close()
        except TimeoutError:
            return True
        return False


@pytest.fixture(scope="module")
def evaluators() -> Iterator[dict[str, Evaluator]]:
    with (
        Evaluator(ProbeTask(), limits=LIMITS) as checked,
        Evaluator(ProbeTask(), limits=LIMITS, static_check=False) as unchecked,
    ):
        yield {"static": checked, "runtime": unchecked}


@pytest.fixture
def traps(tmp_path: Path) -> Iterator[Traps]:
    victim_dir = tmp_path / "victim_dir"
    victim_dir.mkdir()
    victim = victim_dir / "victim.txt"
    victim.write_text("must survive")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield Traps(
            marker=tmp_path / "marker",
            escaped_marker=Path("/dev/shm") / f"coevo-escape-{uuid.uuid4().hex}",  # shared memory, machine-wide
            victim=victim,
            victim_dir=victim_dir,
            listener=listener,
        )


def sandbox_processes(evaluator: Evaluator, grace: float = 1.0) -> list[psutil.Process]:
    """Candidate processes below the fork server after ``grace`` seconds (it adopts orphans).

    The spare child forked ahead of need is not a candidate's; the grace covers a previous
    successful candidate, which the evaluator does not wait for.
    """
    pid = evaluator.sandbox.server_pid
    deadline = time.monotonic() + grace
    while pid:
        spares = evaluator.sandbox.spare_pids()
        processes = psutil.Process(pid).children(recursive=True)
        children = [child for child in processes if child.pid not in spares]
        if not children or time.monotonic() > deadline:
            return children
        time.sleep(0.01)
    return []


def proc_limit(pid: int, name: str) -> tuple[str, str]:
    """(soft, hard) of one limit, from /proc (prlimit(2) on another user's process needs a capability)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            soft, hard = line[len(name) :].split()[:2]
            return soft, hard
    raise KeyError(name)


def proc_status(pid: int, field: str) -> str:
    """One field of /proc/PID/status, e.g. ``SigCgt`` (the mask of signals the process handles)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split()[1]
    raise KeyError(field)


def test_corpus_is_large_and_annotated() -> None:
    names = {case.name for case in CORPUS}
    assert len(names) >= 100
    assert all(case.expect.strip() for case in CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[f"{case.name}-{case.layer}" for case in CORPUS])
def test_hostile_candidate_is_contained(case: Case, evaluators: dict[str, Evaluator], traps: Traps) -> None:
    result = _contained_run(evaluators[case.layer], case, traps)
    assert not result.valid
    assert result.reason is not None and re.search(case.expect, result.reason), result.reason


@pytest.fixture(scope="module", params=["own uids", "shared uid"])
def unguarded(request: pytest.FixtureRequest) -> Iterator[Evaluator]:
    with unguarded_evaluator(request.param, limits=LIMITS) as evaluator:
        yield evaluator


WHOLE_CORPUS = [case for case in CORPUS if case.layer == "static"]


@pytest.mark.parametrize("case", WHOLE_CORPUS, ids=[case.name for case in WHOLE_CORPUS])
def test_hostile_candidate_is_contained_by_the_kernel_layers_alone(
    case: Case, unguarded: Evaluator, traps: Traps
) -> None:
    """With the guards off the case does what it was written to do (its reason is then the
    kernel's or the task's, not a guard's): a verdict it earns scores an index of each instance."""
    result = _contained_run(unguarded, case, traps)
    if result.valid:
        instances = ProbeTask().groups("search")[0].instances
        assert all(objective in instance["values"] for objective, instance in zip(result.per_instance, instances))


def _contained_run(evaluator: Evaluator, case: Case, traps: Traps) -> EvalResult:
    """The case's verdict, after checking that it kept its time limit, touched nothing outside its
    process, left nothing behind and left the evaluator able to judge the next candidate."""
    start = time.monotonic()
    result = evaluator.evaluate(traps.render(case.code))
    assert time.monotonic() - start < LIMITS.candidate_seconds + MARGIN_SECONDS
    assert sandbox_processes(evaluator) == []
    assert not traps.marker.exists() and not traps.escaped_marker.exists()
    assert traps.victim.read_text() == "must survive"
    assert traps.listener_received_nothing()
    follow_up = evaluator.evaluate(f"{TRIVIAL}# after {case.name}\n")
    assert follow_up.valid, follow_up.reason
    return result


def test_running_child_is_isolated(evaluators: dict[str, Evaluator]) -> None:
    """Observed from outside while a candidate sleeps: own group, limits, root, user, namespaces, seccomp."""
    evaluator = evaluators["static"]
    sleeper = "import time\n\ndef pick(values):\n    time.sleep(5)\n    return 0\n"
    worker = threading.Thread(target=evaluator.evaluate, args=(sleeper,))
    worker.start()
    try:
        child = _wait_for_one_child(evaluator)
        assert os.getpgid(child.pid) == child.pid
        assert proc_limit(child.pid, "Max address space") == (str(LIMITS.memory_mb << 20),) * 2
        assert proc_limit(child.pid, "Max processes") == ("0", "0")
        assert proc_limit(child.pid, "Max file size") == (str(LIMITS.file_bytes),) * 2
        assert int(proc_status(child.pid, "SigCgt"), 16) == 0  # no handler of the fork server's survives
        assert proc_status(child.pid, "NoNewPrivs") == "1"
        assert proc_status(child.pid, "Seccomp") == "2"  # a filter is installed
        assert psutil.Process(child.pid).environ() == {}
        for namespace in ("net", "mnt", "ipc", "pid"):  # pid: it can neither see nor name a host process
            assert os.readlink(f"/proc/{child.pid}/ns/{namespace}") != os.readlink(f"/proc/self/ns/{namespace}")
        assert namespace_pids(child.pid)[1:] == [1]  # alone in a PID namespace of its own, which ends with it
        assert os.listdir(f"/proc/{child.pid}/root") == []  # an empty root: no file of the machine
        if os.geteuid() == 0:
            assert child.uids().effective > CANDIDATE_UID_BASE
    finally:
        worker.join()
    assert sandbox_processes(evaluator) == []


def _wait_for_one_child(evaluator: Evaluator, timeout: float = 5.0) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = sandbox_processes(evaluator)
        if children:
            return children[0]
        time.sleep(0.01)
    raise AssertionError("no candidate process appeared")


def test_closing_the_evaluator_stops_the_fork_server() -> None:
    evaluator = Evaluator(ProbeTask(), limits=LIMITS)
    assert evaluator.evaluate(TRIVIAL).valid
    server = psutil.Process(evaluator.sandbox.server_pid)
    evaluator.close()
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE


@pytest.mark.skipif(os.geteuid() != 0, reason="setns back to this process's PID namespace needs root")
def test_each_candidate_forked_gets_a_new_pid_namespace_and_the_forker_keeps_its_own() -> None:
    """``candidate_forker`` through unshare and setns around ``os.fork``: each child is pid 1 of a
    namespace of its own, and a process forked after one (a driver) is in the forker's namespace."""
    fork = candidate_forker(own_pid_namespace(), alone=True)
    seen = []
    for forked in (fork, fork, os.fork):
        read_end, write_end = os.pipe()
        pid = forked()
        if pid == 0:
            os.write(write_end, f"{os.getpid()} {os.readlink('/proc/self/ns/pid')}".encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as reply:
            seen.append(reply.read().split())
        os.waitpid(pid, 0)
    own = os.readlink("/proc/self/ns/pid")
    (first_pid, first), (second_pid, second), (driver_pid, driver) = seen
    assert first_pid == second_pid == "1"
    assert len({own, first, second}) == 3
    assert driver == own and driver_pid != "1"


def test_the_fork_server_loads_no_module_that_only_the_parent_needs() -> None:
    """What the fork server imports is in every candidate's process, its pages copied at each fork:
    package metadata (``importlib.metadata``: csv, zipfile) and ``ctypes.util`` (subprocess,
    shutil, their compression modules) stay out. Their extension modules show in its memory map."""
    with Evaluator(ProbeTask(), limits=LIMITS) as evaluator:
        assert evaluator.evaluate(TRIVIAL).valid
        maps = Path(f"/proc/{evaluator.sandbox.server_pid}/maps").read_text()
    mapped = {Path(line.split()[-1]).name.partition(".")[0] for line in maps.splitlines() if "/" in line}
    assert "_json" in mapped  # an extension module the sandbox does need
    assert not mapped & {"_csv", "_bz2", "_lzma", "_posixsubprocess"}


CROSS_ATTACKERS = ["fork_bomb", "memory_bomb_numpy", "loop_python", "os_exit", "stdout_flood", "signal_ignore_sigterm"]


@pytest.mark.parametrize("attacker_first", [True, False], ids=["attacker-first", "normal-first"])
@pytest.mark.parametrize("name", CROSS_ATTACKERS)
def test_an_attacker_does_not_change_the_candidate_beside_it(
    name: str, attacker_first: bool, evaluators: dict[str, Evaluator], traps: Traps
) -> None:
    evaluator = evaluators["runtime"]  # the static check off: the attacker really runs
    normal = ProbeTask().seed_code()
    alone = evaluator.evaluate(normal + f"# alone {traps.escaped_marker.name}\n")
    attacker = traps.render((CORPUS_DIR / f"{name}.candidate").read_text())
    beside = normal + f"# beside {traps.escaped_marker.name}\n"  # a distinct source: judged afresh
    batch = [attacker, beside] if attacker_first else [beside, attacker]
    results = dict(zip(batch, evaluator.evaluate_many(batch)))
    assert not results[attacker].valid
    assert results[beside].valid and results[beside].per_instance == alone.per_instance
