"""Measure the seed and classical heuristics of tasks on a split (trusted, in-process).

    python experiments/measure_baselines.py tsp_construct kp_construct --split test

Prints one row per (task, heuristic, group): mean objective in the task's natural sign and the
gap to the shipped reference. These are the figures the published numbers are checked against.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from tasks import SPLITS, TASK_NAMES, get_task
from tasks.baselines import classical_files, evaluate_split, file_solver, seed_solver


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", choices=TASK_NAMES)
    parser.add_argument("--split", default="val", choices=SPLITS)
    parser.add_argument("--limit", type=int, default=None, help="first N instances of each group")
    args = parser.parse_args(argv)

    table = Table("task", "split", "heuristic", "group", "objective", "gap %", "instances", "seconds")
    for name in args.tasks:
        task = get_task(name)
        solvers = {"seed": seed_solver(task)} | {
            label: file_solver(task, path) for label, path in classical_files(task).items()
        }
        for label, solve in solvers.items():
            started = time.perf_counter()
            results = evaluate_split(task, args.split, solve, args.limit)
            seconds = time.perf_counter() - started
            for result in results:
                gap = "-" if result.gap_pct is None else f"{result.gap_pct:.2f}"
                table.add_row(name, args.split, label, result.label, f"{result.objective:.4f}", gap,
                              str(result.n_instances), f"{seconds:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
