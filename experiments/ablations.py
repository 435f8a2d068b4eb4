"""Paired ablations of the search machinery (diff edits, islands, the novelty check): each ablation runs
one method with a setting off (control) and on (treatment) at the same budget, on the same tasks and
seeds, and compares the two runs of each (task, seed) as the grid does (relative improvement of the best search objective, exact Wilcoxon), with
Holm's correction over every comparison of the call.

    python experiments/ablations.py --ablations diff islands novelty --tasks bpp_online tsp_construct \\
        --budget 168 --seeds 0 1 2 3 4 5 6 7 --model qwen-coder-0.5b --out runs/ablations \\
        [--set population_size=8] [--scale F] [--eval-limit N] [--results experiments/evidence/results.json]

Each arm is a grid (`experiments/grid.py`) under OUT/<ablation>/<arm>, so an interrupted call resumes
where it stopped and a finished run is never run again. OUT/ablations.md and OUT/ablations.json hold
the table; --results also records it under `search_ablations` in the evidence file.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "evidence"))
from evidence_file import merge  # noqa: E402
from grid import RunResult, finite_or_none, improvement  # noqa: E402
from grid import main as run_grid  # noqa: E402

from coevo.stats import compare_paired, holm  # noqa: E402
from tasks import TASK_NAMES  # noqa: E402

ABLATIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "diff": {"control": ('operators.edit="full"',), "treatment": ('operators.edit="diff"',)},
    "islands": {
        "control": ("population.islands=1",),
        "treatment": ("population.islands=4", "population.migration_interval=2"),
    },
    "novelty": {"control": ("novelty.enabled=false",), "treatment": ("novelty.enabled=true",)},
}
"""Per ablation, the settings of each arm (config assignments, applied after the common --set)."""
KEY = "search_ablations"


def arm_results(out: Path, options: argparse.Namespace, ablation: str, arm: str) -> list[RunResult]:
    """Run (or resume) one arm's grid and read its runs back."""
    arm_out = out / ablation / arm
    assignments = [*options.set, *ABLATIONS[ablation][arm]]
    argv = ["--tasks", *options.tasks, "--methods", options.method, "--budgets", str(options.budget)]
    argv += ["--seeds", *map(str, options.seeds), "--scale", str(options.scale), "--out", str(arm_out)]
    argv += [] if options.model is None else ["--model", options.model]
    argv += [] if options.eval_limit is None else ["--eval-limit", str(options.eval_limit)]
    for assignment in assignments:
        argv += ["--set", assignment]
    if run_grid(argv) != 0:
        raise SystemExit(2)
    return [RunResult(**run) for run in json.loads((arm_out / "grid.json").read_text())["runs"]]


def comparison(ablation: str, task: str, control: list[RunResult], treatment: list[RunResult]) -> dict[str, Any]:
    """The treatment against the control on `task`, paired by seed."""
    by_seed = {r.seed: r for r in control if r.task == task}
    pairs = [(r, by_seed[r.seed]) for r in treatment if r.task == task and r.seed in by_seed]
    result = compare_paired([improvement(t, c) for t, c in pairs])
    return {
        "ablation": ablation,
        "task": task,
        "seeds": [t.seed for t, _ in pairs],
        "control": [c.gap_pct for _, c in pairs],
        "treatment": [t.gap_pct for t, _ in pairs],
        "wins": result.wins,
        "ties": result.ties,
        "losses": result.losses,
        "median_improvement_pct": finite_or_none(result.median_improvement),
        "p": result.test.p_value,
    }


def median(value: float | None) -> str:
    """A median improvement, '-' where a run without any valid heuristic made it infinite."""
    return "-" if value is None else f"{value:.3g}"


def table(rows: list[dict[str, Any]], command: str) -> str:
    lines = [
        f"`{command}`",
        "",
        "| ablation | task | seeds | wins / ties / losses | median improvement % | p (exact Wilcoxon) | Holm |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['ablation']} | {row['task']} | {len(row['seeds'])} | {row['wins']} / {row['ties']} / "
            f"{row['losses']} | {median(row['median_improvement_pct'])} | {row['p']:.3g} | {row['p_holm']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="experiments/ablations.py", description=__doc__.splitlines()[0])
    parser.add_argument("--ablations", nargs="+", choices=sorted(ABLATIONS), default=sorted(ABLATIONS))
    parser.add_argument("--tasks", nargs="+", choices=TASK_NAMES, default=["bpp_online", "tsp_construct"])
    parser.add_argument("--method", default="eoh", help="the method every arm runs (default: eoh)")
    parser.add_argument("--budget", type=int, default=168, help="reference budget in evaluations")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(8)))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--model", default=None)
    parser.add_argument("--eval-limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/ablations"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every arm")
    parser.add_argument("--results", type=Path, default=None, help="also record the table in this evidence file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    options = parse_args(argv)
    rows = []
    for ablation in options.ablations:
        control = arm_results(options.out, options, ablation, "control")
        treatment = arm_results(options.out, options, ablation, "treatment")
        rows += [comparison(ablation, task, control, treatment) for task in options.tasks]
    adjusted = holm({f"{r['ablation']}/{r['task']}": r["p"] for r in rows})
    rows = [{**r, "p_holm": adjusted[f"{r['ablation']}/{r['task']}"]} for r in rows]
    command = shlex.join(["python", "experiments/ablations.py", *argv])
    record = {"command": command, "arms": {a: ABLATIONS[a] for a in options.ablations}, "comparisons": rows}
    (options.out / "ablations.json").write_text(json.dumps(record, indent=2) + "\n")
    (options.out / "ablations.md").write_text(table(rows, command))
    if options.results is not None:
        merge(KEY, record, options.results)
    print(table(rows, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
