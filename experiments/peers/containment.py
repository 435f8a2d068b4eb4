"""Containment of each system's own evaluator against cases from tests/hostile/.

    python experiments/peers/containment.py [--quick] [--json] [--systems coevo openevolve ...]

Each case runs in a fresh driver process (evaluators.py) through one system's evaluator, the
way that system evaluates a program, on coevo's probe task. Watched from outside, per case:
- killed on timeout: a looping candidate's evaluation returns within limit + margin, no thread of
  the evaluating process still runs candidate code (OpenEvolve abandons the thread), and nothing of
  the evaluation still burns CPU afterwards (an orphan process would);
- memory capped: no process of the evaluation grows its address space by more than MEMORY_GUARD_MB
  (past it the harness kills the tree itself, to protect the shared machine, and counts the case as
  not capped; address space, not RSS, because a bomb of untouched zero pages never becomes resident);
- no file written: the marker files do not appear and the victim file survives;
- no network: a live listener on 127.0.0.1 receives no connection.
fork_bomb is left out: no peer limits processes, and it would take the shared machine down.
Writes experiments/peers/containment.json and prints a Markdown table (or --json).
"""

from __future__ import annotations

import argparse
import json
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

PEERS_DIR = Path(__file__).resolve().parent
REPO = PEERS_DIR.parents[1]
sys.path[:0] = [str(REPO), str(PEERS_DIR)]

from venvs import install  # noqa: E402

from tasks.references import DATA_DIR  # noqa: E402

CORPUS = REPO / "tests" / "hostile"
LIMIT_S = 3.0
SCRIPT_LIMIT_S = 30.0
"""ShinkaEvolve's job time and LLM4AD's timeout cover the start of the evaluating process (a Python
script; a spawned interpreter), which takes seconds on a loaded machine: with 3 s both stopped every
program before it ran, valid ones included."""
MARGIN_S = 5.0
MEMORY_GUARD_MB = 1500
MEMORY_WINDOW_S = 10.0
"""How long a memory bomb is watched after its evaluator returned: an uncapped one that outlives its
evaluation (an abandoned thread) passes the guard within it at the rates measured here."""
BURN_CPU_S = 0.05
BURN_WINDOW_S = 2.5
"""An idle tree spends ~0 CPU; a candidate still looping after its evaluator returned spends more than
BURN_CPU_S within BURN_WINDOW_S even when the shared machine gives it a small share."""
CASES = {
    "timeout": ["loop_python", "loop_numpy_c_level", "sleep", "signal_ignore_sigterm"],
    "memory": ["memory_bomb_list", "memory_bomb_numpy"],
    "file": ["write_file_open", "write_file_pathlib", "os_write_tmp", "delete_file_os", "delete_tree_shutil", "os_system", "subprocess_run"],
    "network": ["socket_connect", "socket_from_import"],
}  # fmt: skip
QUICK_CASES = {kind: names[:1] for kind, names in CASES.items()}
SYSTEMS = ("coevo", "openevolve", "llm4ad", "shinka")


def _tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _sum(processes: list[psutil.Process], measure: Any) -> float:
    total = 0.0
    for process in processes:
        try:
            total += measure(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _kill_tree(process: psutil.Process) -> None:
    for member in reversed(_tree(process)):
        try:
            member.kill()
        except psutil.NoSuchProcess:
            pass


def driver_command(system: str) -> list[str]:
    if system == "coevo":
        return [sys.executable, str(PEERS_DIR / "evaluators.py"), "coevo"]
    return [str(install(system)), str(PEERS_DIR / "evaluators.py"), system]


def run_case(system: str, name: str, window_s: float = BURN_WINDOW_S) -> dict[str, Any]:
    """One hostile case through one system, observed from outside."""
    work = Path(tempfile.mkdtemp(prefix="coevo-contain-"))
    victim_dir = work / "victim_dir"
    victim_dir.mkdir()
    victim = victim_dir / "victim.txt"
    victim.write_text("must survive")
    marker, escaped = work / "marker", Path("/dev/shm") / f"coevo-escape-{uuid.uuid4().hex}"
    strays = [marker, escaped, Path("/tmp") / escaped.name, Path("/tmp") / f"{escaped.name}.npy"]
    with socket.create_server(("127.0.0.1", 0)) as listener:
        code = (CORPUS / f"{name}.candidate").read_text()
        for placeholder, value in {
            "{MARKER}": marker, "{MARKER_NAME}": escaped.name, "{VICTIM}": victim, "{VICTIM_DIR}": victim_dir,
            "{PORT}": listener.getsockname()[1], "{DATA_DIR}": DATA_DIR,
        }.items():  # fmt: skip
            code = code.replace(placeholder, str(value))
        candidate = work / "candidate.py"
        candidate.write_text(code)
        command = [*driver_command(system), str(candidate), "--limit", str(limit_of(system))]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
        watched = psutil.Process(process.pid)
        reader = _LineReader(process)
        ready = reader.next(timeout_s=600)  # imports and set-up: not part of the evaluation
        memory = _MemoryWatch(watched)
        line, started = None, time.monotonic()
        while ready and line is None and process.poll() is None and not memory.over_guard():
            if time.monotonic() - started > limit_of(system) + 120:  # a peer that never returns: hung
                break
            line = reader.next(timeout_s=0.05)
        report = json.loads(line) if line else {}
        returned_after = report.get("returned_after_s")
        cpu_before = _sum(_tree(watched), _cpu)
        window_end = time.monotonic() + window_s
        while time.monotonic() < window_end and not memory.over_guard():  # what the evaluation left running
            time.sleep(0.05)
        still_burning = _sum(_tree(watched), _cpu) - cpu_before > BURN_CPU_S
        peak_mb, guard_killed = memory.peak_mb, memory.peak_mb > MEMORY_GUARD_MB
        _kill_tree(watched)
        process.wait(timeout=30)
        listener.settimeout(0.05)
        try:
            listener.accept()[0].close()
            connected = True
        except TimeoutError:
            connected = False
    written = any(path.exists() for path in strays) or victim.read_text() != "must survive" if victim.exists() else True
    for path in strays:
        path.unlink(missing_ok=True)
    return {
        "system": system,
        "case": name,
        "returned_after_s": returned_after,
        "address_space_growth_mb": round(peak_mb),
        "memory_guard_killed": guard_killed,
        "still_burning": still_burning,
        "candidate_threads": report.get("candidate_threads"),
        "file_written": written,
        "connected": connected,
        "verdict": report.get("verdict"),
    }


class _MemoryWatch:
    """The largest address-space growth of any process in a tree since it was first seen."""

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self.first_vms: dict[int, int] = {}
        self.peak_mb = 0.0

    def over_guard(self) -> bool:
        for member in _tree(self.root):
            try:
                vms = member.memory_info().vms
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            self.peak_mb = max(self.peak_mb, (vms - self.first_vms.setdefault(member.pid, vms)) / 2**20)
        return self.peak_mb > MEMORY_GUARD_MB


class _LineReader:
    """A child's stdout lines, each waited for with a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._lines.put(line)

    def next(self, timeout_s: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return None


def limit_of(system: str) -> float:
    return SCRIPT_LIMIT_S if system in ("shinka", "llm4ad") else LIMIT_S


def contained(result: dict[str, Any], kind: str) -> bool:
    """Whether the system contained the case on the property the case tests."""
    if kind == "timeout":
        returned = result["returned_after_s"]
        on_time = returned is not None and returned < limit_of(result["system"]) + MARGIN_S
        return on_time and not result["still_burning"] and not result["candidate_threads"]
    if kind == "memory":  # a bomb still running after its evaluator returned has nothing left to stop it
        return not (result["memory_guard_killed"] or result["still_burning"] or result["candidate_threads"])
    if kind == "file":
        return not result["file_written"]
    return not result["connected"]


def summary(results: list[dict[str, Any]], cases: dict[str, list[str]]) -> list[dict[str, Any]]:
    """One row per system: for each property, contained cases out of those testing it."""
    kind_of = {name: kind for kind, names in cases.items() for name in names}
    rows = []
    for system in dict.fromkeys(r["system"] for r in results):
        row: dict[str, Any] = {"system": system}
        for kind in cases:
            mine = [r for r in results if r["system"] == system and kind_of[r["case"]] == kind]
            row[kind] = f"{sum(contained(r, kind) for r in mine)}/{len(mine)}"
        rows.append(row)
    return rows


HEADERS = {"timeout": "killed on timeout", "memory": "memory capped", "file": "no file written", "network": "no network"}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| evaluator | " + " | ".join(HEADERS.values()) + " |", "| --- |" + " --- |" * len(HEADERS)]
    lines += ["| " + " | ".join([row["system"], *(row[k] for k in HEADERS)]) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one case per property")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--cases", nargs="+", help="only these cases; results replace the same cases in the output")
    args = parser.parse_args()
    cases = QUICK_CASES if args.quick else CASES
    if args.cases:
        cases = {kind: [n for n in names if n in args.cases] for kind, names in cases.items()}
    target = PEERS_DIR / ("work/containment-quick.json" if args.quick else "containment.json")
    results = []
    for system in args.systems:
        for kind, names in cases.items():
            for name in names:
                result = run_case(system, name, MEMORY_WINDOW_S if kind == "memory" else BURN_WINDOW_S)
                print(f"{system:10s} {name:22s} contained={contained(result, kind)} {result}", file=sys.stderr, flush=True)
                results.append(result)
    if target.exists():  # keep the earlier results of the (system, case) pairs not run now
        fresh = {(r["system"], r["case"]) for r in results}
        earlier = [r for r in json.loads(target.read_text())["cases"] if (r["system"], r["case"]) not in fresh]
        results = earlier + results
    every = QUICK_CASES if args.quick else CASES
    rows = summary(results, every)
    payload = {"limit_s": LIMIT_S, "process_start_limit_s": SCRIPT_LIMIT_S, "memory_guard_mb": MEMORY_GUARD_MB, "rows": rows, "cases": results}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=1) + "\n")
    print(json.dumps(payload, indent=1) if args.json else markdown(rows))


if __name__ == "__main__":
    main()
