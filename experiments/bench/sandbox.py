"""Benchmark coevo's sandboxed evaluator against the common baseline design, side by side.

The baseline is what LLM4AD and EoH do: one fresh ``multiprocessing.Process`` per candidate,
returning through a ``multiprocessing.Queue``, no further isolation. Both evaluate the same
candidates (a trivial one on the probe task, and each importable task's seed heuristic), both
score in the parent with the task's validator, both run ``--workers`` candidates at a time.

The trivial candidate is timed twice: from a bare process, and from one that holds model-sized
memory (``--parent-mb``), because the baseline forks the evaluating process and coevo's runner
holds its model's weights; coevo's fork server does not depend on the parent's size.

``--previous PATH`` also times an earlier design of coevo's own sandbox, from a checkout of it
(e.g. ``git worktree add /tmp/previous COMMIT``), in a process of its own that imports coevo from
there: the same candidates, in the same alternating rounds, so each row says what the current
design costs against it (the split that runs only the candidate's function in the sandbox was
measured against the commit before it, where the whole task ran there).

Columns: candidates/second of both (medians over alternating rounds, so both see the same load
on a shared machine), the median of the per-round ratios and their range, coevo's per-candidate overhead (median sequential wall time
minus the heuristic's in-process time), and CPU milliseconds per candidate summed over every
process involved (the figure that a busy machine distorts least). Then what each kernel layer
(the empty root's mount namespace, seccomp, a uid per child, a PID namespace per child) adds per
trivial candidate.

Usage: ``python experiments/bench/sandbox.py [--candidates N] [--rounds R] [--seed-candidates M]
[--limit L] [--workers W] [--parent-mb MB] [--previous PATH] [--json]``
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import queue
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import psutil

from coevo.evaluate import Evaluator, Limits
from coevo.evaluate.probe import ProbeTask
from coevo.evaluate.sandbox import SKIPPABLE_LAYERS, InstancePayload, Sandbox
from rounds import alternate, ratio_summary, target_line
from tasks import TASK_NAMES, get_task
from tasks.base import Instance, InvalidSolution, Task

TRIVIAL_CODE = "def pick(values):\n    return 0\n"
TARGETS = {"vs_previous": (">=", 0.9), "trivial_vs_baseline": (">=", 3.0)}


@dataclass(frozen=True)
class Row:
    candidate: str
    candidates: int
    n_instances: int
    coevo_per_s: float
    baseline_per_s: float
    ratio: float
    """The median of the per-round ratios; ``ratio_min``/``ratio_max`` are their range."""
    ratio_min: float
    ratio_max: float
    coevo_overhead_ms: float
    """Median sequential wall time per candidate minus the in-process time of its heuristic."""
    coevo_cpu_ms: float
    baseline_cpu_ms: float
    """CPU time per candidate over every process involved: less sensitive to a busy machine."""
    all_valid: bool
    previous_per_s: float | None = None
    """The earlier design's candidates/second (``--previous``); the ratio fields below compare to it."""
    previous_ratio: float | None = None
    previous_ratio_min: float | None = None
    previous_ratio_max: float | None = None
    previous_cpu_ms: float | None = None


class PreviousDesign:
    """An earlier checkout of coevo's sandbox, evaluating in a process of its own (see the doc)."""

    def __init__(self, checkout: str) -> None:
        checkout = os.path.abspath(checkout)
        paths = [checkout, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in paths if path)}
        self._process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            cwd=checkout,  # the fork server starts with ``-m``, which looks in the working directory first
            text=True,
        )

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        reply = self._process.stdout.readline()
        if not reply:
            raise RuntimeError("the previous design's process ended")
        return json.loads(reply)

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait()


def serve() -> None:
    """The ``--serve`` side of ``PreviousDesign``: one JSON request per line, one reply per line."""
    evaluator: Evaluator | None = None
    for line in sys.stdin:
        request = json.loads(line)
        if request["kind"] == "open":
            if evaluator is not None:
                evaluator.close()
            task = ProbeTask() if request["task"] == "probe" else get_task(request["task"])
            limits = Limits(instance_seconds=30, candidate_seconds=300)
            evaluator = Evaluator(task, "search", limit=request["limit"], limits=limits, workers=request["workers"])
            reply: dict[str, Any] = {"valid": evaluator.evaluate(request["code"]).valid}
        else:
            assert evaluator is not None
            server = psutil.Process(evaluator.sandbox.server_pid)
            start, cpu = time.perf_counter(), cpu_seconds(server)
            results = evaluator.evaluate_many(request["codes"])
            seconds = time.perf_counter() - start
            used = settled_cpu_seconds(evaluator, server) - cpu
            reply = {"per_s": len(results) / seconds, "cpu_ms": 1000 * used / len(results),
                     "valid": all(result.valid for result in results)}  # fmt: skip
        print(json.dumps(reply), flush=True)
    if evaluator is not None:
        evaluator.close()


def distinct_copies(code: str, count: int, tag: str) -> list[str]:
    """Copies that differ in a comment, so no cache can answer for them."""
    return [f"{code}\n# {tag}, copy {index}\n" for index in range(count)]


def instances_of(task: Task, limit: int | None) -> list[Instance]:
    instances = [instance for group in task.groups("search") for instance in group.instances]
    return instances[:limit] if limit else instances


def _baseline_child(code: str, task: Task, instances: list[Instance], results: multiprocessing.Queue) -> None:
    namespace: dict[str, Any] = {}
    try:
        exec(code, namespace)  # noqa: S102 - the baseline design: no isolation beyond the process
        heuristic = namespace[task.function_name]
        results.put([task.construct(heuristic, instance) for instance in instances])
    except Exception as error:  # noqa: BLE001
        results.put(f"{type(error).__name__}: {error}")


def baseline_evaluate(code: str, task: Task, instances: list[Instance], timeout: float) -> bool:
    """One candidate the LLM4AD/EoH way; True when every solution scores."""
    results: multiprocessing.Queue = multiprocessing.Queue()
    process = multiprocessing.Process(target=_baseline_child, args=(code, task, instances, results))
    process.start()
    try:
        solutions = results.get(timeout=timeout)
    except queue.Empty:
        solutions = None
    try:
        for child in psutil.Process(process.pid).children(recursive=True):  # LLM4AD's clean-up
            child.kill()
    except psutil.NoSuchProcess:
        pass
    process.kill()
    process.join()
    results.close()
    if not isinstance(solutions, list):
        return False
    try:
        for instance, solution in zip(instances, solutions):
            task.score(instance, solution)
    except InvalidSolution:
        return False
    return True


def in_process_seconds(code: str, task: Task, instances: list[Instance]) -> float:
    """What running the heuristic costs with no sandbox at all."""
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - trusted: the trivial candidate or a shipped seed
    start = time.perf_counter()
    for instance in instances:
        task.construct(namespace[task.function_name], instance)
    return time.perf_counter() - start


def cpu_seconds(server: psutil.Process) -> float:
    """CPU used so far by this process, its reaped children, and the fork server with its own,
    reaped and alive (the trusted driver processes serve many candidates: they stay alive)."""
    own, served = os.times(), server.cpu_times()
    alive = 0.0
    for process in server.children(recursive=True):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        alive += times.user + times.system
    return alive + sum((own.user, own.system, own.children_user, own.children_system)) + sum(
        (served.user, served.system, served.children_user, served.children_system)
    )


def settled_cpu_seconds(evaluator: Evaluator, server: psutil.Process, grace: float = 1.0) -> float:
    """``cpu_seconds`` once the fork server has reaped every candidate process (a successful one
    is left to exit on its own), so that each candidate's CPU is counted in the round that ran it."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        spares = evaluator.sandbox.spare_pids()
        if all(child.pid in spares or _namespace_init(child.pid) for child in server.children()):
            break
        time.sleep(0.002)
    return cpu_seconds(server)


def _namespace_init(pid: int) -> bool:
    """The init of the fork server's PID namespace (where it has one): no candidate's."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return any(line.startswith("NSpid:") and line.split()[2:] == ["1"] for line in status)
    except OSError:
        return False


def measure(
    label: str, task: Task, code: str, count: int, limit: int | None, args: argparse.Namespace, previous: PreviousDesign | None
) -> Row:
    """Median throughput of the designs on distinct copies of ``code``, and coevo's overhead.

    The designs alternate round by round, so all see the same load on a shared machine.
    """
    limits = Limits(instance_seconds=30, candidate_seconds=300)
    instances = instances_of(task, limit)
    coevo_rates, baseline_rates, coevo_cpu, baseline_cpu, sequential, valid = [], [], [], [], [], True
    previous_rates, previous_cpu = [], []
    if previous is not None:
        valid &= previous.ask(kind="open", task=task.name, code=code, limit=limit, workers=args.workers)["valid"]
    with Evaluator(task, "search", limit=limit, limits=limits, workers=args.workers) as evaluator:
        evaluator.evaluate(code)  # start the fork server outside the timed region
        server = psutil.Process(evaluator.sandbox.server_pid)
        for round_index in range(args.rounds):
            codes = distinct_copies(code, count, f"round {round_index}")
            start, cpu = time.perf_counter(), cpu_seconds(server)
            valid &= all(result.valid for result in evaluator.evaluate_many(codes))
            coevo_rates.append(count / (time.perf_counter() - start))
            coevo_cpu.append((settled_cpu_seconds(evaluator, server) - cpu) / count)
            if previous is not None:
                reply = previous.ask(kind="round", codes=distinct_copies(code, count, f"previous round {round_index}"))
                previous_rates.append(reply["per_s"])
                previous_cpu.append(reply["cpu_ms"])
                valid &= reply["valid"]
            with ThreadPoolExecutor(max_workers=args.workers) as pool:
                start, cpu = time.perf_counter(), cpu_seconds(server)
                valid &= all(
                    pool.map(lambda one: baseline_evaluate(one, task, instances, limits.candidate_seconds), codes)
                )
                baseline_rates.append(count / (time.perf_counter() - start))
                baseline_cpu.append((cpu_seconds(server) - cpu) / count)
            for candidate in distinct_copies(code, max(3, count // (4 * args.rounds)), f"sequential {round_index}"):
                start = time.perf_counter()
                evaluator.evaluate(candidate)
                sequential.append(time.perf_counter() - start)
    ratios = ratio_summary("ratio", coevo_rates, baseline_rates)
    against_previous: dict[str, float | None] = {}
    if previous_rates:
        against_previous = {
            "previous_per_s": statistics.median(previous_rates),
            **ratio_summary("previous_ratio", coevo_rates, previous_rates),
            "previous_cpu_ms": statistics.median(previous_cpu),
        }
    return Row(
        candidate=label,
        candidates=count,
        n_instances=len(instances),
        coevo_per_s=statistics.median(coevo_rates),
        baseline_per_s=statistics.median(baseline_rates),
        **ratios,
        coevo_overhead_ms=1000 * (statistics.median(sequential) - in_process_seconds(code, task, instances)),
        coevo_cpu_ms=1000 * statistics.median(coevo_cpu),
        baseline_cpu_ms=1000 * statistics.median(baseline_cpu),
        all_valid=valid,
        **against_previous,
    )


@dataclass(frozen=True)
class LayerCost:
    layer: str
    ms: float
    """Median over rounds of (full sandbox - sandbox without this layer): wall time per trivial
    candidate, run one after another."""
    ms_min: float
    ms_max: float
    cpu_ms: float
    """The same difference in CPU time over the fork server and its children (less load-sensitive)."""
    cpu_ms_min: float
    cpu_ms_max: float


def layer_costs(args: argparse.Namespace) -> list[LayerCost]:
    """What each kernel layer adds to a trivial candidate's sequential wall time.

    The full sandbox and one without the layer alternate round by round (ABAB); each round times
    ``--layer-candidates`` candidates one after another on each side and keeps the median.
    """
    task = ProbeTask()
    payload = InstancePayload.of(instances_of(task, None))
    limits = Limits()
    costs = []
    for layer in sorted(SKIPPABLE_LAYERS):
        with Sandbox(task, payload) as full, Sandbox(task, payload, skipped_layers=frozenset({layer})) as without:
            for sandbox in (full, without):
                sandbox.run(TRIVIAL_CODE, limits)  # start both fork servers outside the timed rounds
            sides = {name: functools.partial(per_candidate_cost, box, limits, args) for name, box in (("full", full), ("without", without))}
            samples = alternate(sides, args.rounds)
        figures = []
        for measure_index in (0, 1):
            differences = [1000 * (a[measure_index] - b[measure_index]) for a, b in zip(samples["full"], samples["without"])]
            figures += [statistics.median(differences), min(differences), max(differences)]
        costs.append(LayerCost(layer, *figures))
    return costs


def per_candidate_cost(sandbox: Sandbox, limits: Limits, args: argparse.Namespace) -> tuple[float, float]:
    """Median wall seconds and mean CPU seconds (fork server and children) per trivial candidate."""
    server = psutil.Process(sandbox.server_pid)
    times, cpu = [], cpu_seconds(server)
    for _ in range(args.layer_candidates):
        start = time.perf_counter()
        outcome = sandbox.run(TRIVIAL_CODE, limits)
        times.append(time.perf_counter() - start)
        if outcome.failure is not None:
            raise RuntimeError(f"the trivial candidate failed: {outcome.failure}")
    return statistics.median(times), (cpu_seconds(server) - cpu) / args.layer_candidates


def seed_rows(args: argparse.Namespace, previous: PreviousDesign | None) -> tuple[list[Row], list[str]]:
    rows, skipped = [], []
    for name in TASK_NAMES:
        try:
            task = get_task(name)
            code = task.seed_code()
        except (ImportError, NotImplementedError, OSError) as error:
            skipped.append(f"{name} ({type(error).__name__})")
            continue
        rows.append(measure(f"{name} seed", task, code, args.seed_candidates, args.limit, args, previous))
    return rows, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=100, help="trivial candidates per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians are reported")
    parser.add_argument("--seed-candidates", type=int, default=4, help="copies of each task's seed per round (0: skip)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N search instances of each task")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--parent-mb",
        type=int,
        default=540,
        help="also time the trivial candidate with this much memory resident in the evaluating process "
        "(540 MB: SmolLM2-135M in fp32, as the coevo runner holds it); 0 to skip",
    )
    parser.add_argument("--layer-candidates", type=int, default=200, help="trivial candidates per side and round when timing each kernel layer (0: skip)")
    parser.add_argument(
        "--previous", default=None, help="a checkout of an earlier coevo whose sandbox to time beside this one (see the doc)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the --previous side
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.previous is not None and not os.path.isdir(os.path.join(args.previous, "coevo")):
        parser.exit(2, f"sandbox.py: error: --previous {args.previous} is not a coevo checkout\n")
    previous = PreviousDesign(args.previous) if args.previous else None
    try:
        rows = [measure("trivial", ProbeTask(), TRIVIAL_CODE, args.candidates, None, args, previous)]
        if args.parent_mb:
            # The baseline forks the evaluating process; in coevo that process holds the model.
            model_weights = np.ones(args.parent_mb * 2**20 // 8)
            label = f"trivial, parent {args.parent_mb} MB"
            rows.append(measure(label, ProbeTask(), TRIVIAL_CODE, args.candidates, None, args, previous))
            del model_weights
        more, skipped = seed_rows(args, previous) if args.seed_candidates > 0 else ([], [])
        rows += more
    finally:
        if previous is not None:
            previous.close()
    costs = layer_costs(args) if args.layer_candidates > 0 else []
    if args.json:
        report = {"workers": args.workers, "rows": [asdict(row) for row in rows], "skipped": skipped}
        print(json.dumps({**report, "layer_costs": [asdict(cost) for cost in costs]}))
        return
    print(
        f"workers={args.workers}, medians of {args.rounds} alternating rounds "
        "(baseline: one multiprocessing.Process + Queue per candidate)"
    )
    print(
        f"{'candidate':<24}{'n':>5}{'inst':>6}{'coevo/s':>10}{'base/s':>10}{'ratio':>8}{'range':>14}"
        f"{'overhead ms':>13}{'cpu ms coevo':>14}{'cpu ms base':>13}  valid"
    )
    for row in rows:
        print(
            f"{row.candidate:<24}{row.candidates:>5}{row.n_instances:>6}{row.coevo_per_s:>10.1f}"
            f"{row.baseline_per_s:>10.1f}{row.ratio:>7.2f}x{f'{row.ratio_min:.2f}-{row.ratio_max:.2f}x':>14}"
            f"{row.coevo_overhead_ms:>13.2f}{row.coevo_cpu_ms:>14.2f}{row.baseline_cpu_ms:>13.2f}  {row.all_valid}"
        )
    if previous is not None:
        print(f"\nagainst the previous design ({args.previous}): candidates/second, median of {args.rounds} alternating rounds")
        print(f"{'candidate':<24}{'now/s':>10}{'prev/s':>10}{'ratio':>8}{'range':>14}{'cpu ms now':>12}{'cpu ms prev':>13}")
        for row in rows:
            print(
                f"{row.candidate:<24}{row.coevo_per_s:>10.2f}{row.previous_per_s:>10.2f}{row.previous_ratio:>7.2f}x"
                f"{f'{row.previous_ratio_min:.2f}-{row.previous_ratio_max:.2f}x':>14}"
                f"{row.coevo_cpu_ms:>12.2f}{row.previous_cpu_ms:>13.2f}"
            )
        print()
        for row in rows:
            print(target_line(f"{row.candidate} vs_previous", row.previous_ratio, {f"{row.candidate} vs_previous": TARGETS["vs_previous"]}))
    trivial = rows[0]
    print(target_line("trivial vs_baseline", trivial.ratio, {"trivial vs_baseline": TARGETS["trivial_vs_baseline"]}))
    if costs:
        print(
            f"\nkernel layers: ms per trivial candidate, full sandbox minus one without the layer "
            f"(median and range of {args.rounds} ABAB rounds)"
        )
        print(f"{'layer':<14}{'wall ms':>10}{'range':>20}{'cpu ms':>10}{'range':>20}")
        for cost in costs:
            print(
                f"{cost.layer:<14}{cost.ms:>10.3f}{f'{cost.ms_min:.3f} to {cost.ms_max:.3f}':>20}"
                f"{cost.cpu_ms:>10.3f}{f'{cost.cpu_ms_min:.3f} to {cost.cpu_ms_max:.3f}':>20}"
            )
    if skipped:
        print("skipped (not importable yet):", ", ".join(skipped), file=sys.stderr)


if __name__ == "__main__":
    main()
