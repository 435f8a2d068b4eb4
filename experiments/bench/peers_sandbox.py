"""Sandbox throughput: coevo's evaluator against each peer framework's real evaluator, side by side.

Every side is that system's own evaluator, built once in a long-lived worker process in the
system's venv (experiments/peers/evaluators.py --serve): coevo's Evaluator, OpenEvolve's Evaluator
(the evaluator file in a thread under asyncio.wait_for), LLM4AD's SecureEvaluator (a process per
program), ShinkaEvolve's local JobScheduler (a Python process running the evaluation script per
program). All score distinct trivial candidates on coevo's probe task, one at a time, so the figure
is each evaluator's own cost per program. Sides alternate round by round (rounds.py), so all see the
same load on a shared machine; reported: candidates/second per side (median over rounds) and each
peer's rate over coevo's (median of per-round ratios, with their range).

Usage: ``python experiments/bench/peers_sandbox.py [--quick] [--json] [--candidates N] [--rounds R]
[--systems coevo openevolve llm4ad shinka]``. The peers' venvs are installed on first use.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parents[1]
PEERS_DIR = REPO / "experiments" / "peers"
sys.path[:0] = [str(BENCH_DIR), str(PEERS_DIR)]

from rounds import alternate, ratio_summary  # noqa: E402
from venvs import install  # noqa: E402

SYSTEMS = ("coevo", "openevolve", "llm4ad", "shinka")
LIMIT_S = 10


class Worker:
    """One system's evaluator in its own process; `batch(n)` times n evaluations there."""

    def __init__(self, system: str) -> None:
        python = sys.executable if system == "coevo" else str(install(system))
        command = [python, str(PEERS_DIR / "evaluators.py"), system, "--serve", "--limit", str(LIMIT_S)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def batch(self, count: int) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{count}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker exited with {self.process.wait()}")
        return float(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=40, help="trivial candidates per side and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--quick", action="store_true", help="4 candidates, 2 rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    if args.quick:
        args.candidates, args.rounds = 4, 2
    if "coevo" not in args.systems:
        parser.error("coevo is the reference side: keep it in --systems")
    workers = {system: Worker(system) for system in args.systems}
    try:
        for worker in workers.values():
            worker.batch(1)  # warm-up: first-call costs (imports, fork server) are not throughput
        seconds = alternate({s: (lambda w=w: w.batch(args.candidates)) for s, w in workers.items()}, args.rounds)
    finally:
        for worker in workers.values():
            worker.close()
    rates = {s: [args.candidates / t for t in times] for s, times in seconds.items()}
    figures: dict[str, float] = {f"{s}_candidates_per_s": statistics.median(r) for s, r in rates.items()}
    for system in args.systems:
        if system != "coevo":
            figures |= ratio_summary(f"{system}_over_coevo", rates[system], rates["coevo"])
    result = {"candidates": args.candidates, "rounds": args.rounds, "figures": figures}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for name, value in figures.items():
            print(f"{name:36s} {value:12.4g}")


if __name__ == "__main__":
    main()
