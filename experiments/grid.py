"""Run methods x tasks x budgets x seeds and tabulate them in the reference's "better in X of Y" style.

Every run starts from `experiments/configs/<task>__<method>.toml` (the reference setting) and lives in
its own directory `OUT/runs/<task>/<method>/b<budget>-s<seed>`, so an interrupted grid restarts where it
stopped: finished runs are skipped, unfinished ones resumed exactly. Afterwards `OUT/grid.md` and
`OUT/grid.json` hold, per (task, budget, method) cell, the best search objective (and gap %) as mean
+- std over seeds, and the matched comparisons (eoh+es vs eoh, sample+es vs sample, coevo vs eoh and
vs eoh+es) as wins/ties/losses over paired (task, budget, seed) settings with an exact Wilcoxon test.

Flags:
  --tasks T [T ...]      tasks (default: all seven)
  --methods M [M ...]    methods (default: all five)
  --budgets B [B ...]    reference budgets in evaluations (default: 1000 2000)
  --seeds S [S ...]      run seeds (default: 0 1 2)
  --scale F              multiply budgets, population_size and settings.batch by F (even, at least 2 each),
                         so e.g. 0.02 turns the reference grid into one that fits 2 CPU cores
  --model NAME           override the configs' model (e.g. scripted_llm:build with tests/ on PYTHONPATH)
  --eval-limit N         score candidates on the first N search instances only
  --out DIR              run directories and tables (default: runs/grid)
  --configs DIR          the per-(task, method) configs (default: experiments/configs)
  --set KEY=VALUE        override any config key in every run, e.g. llm.max_new_tokens=256 (repeatable)

Example:
  nice -n 10 python experiments/grid.py --tasks tsp_construct --methods eoh eoh+es --budgets 1000 \\
      --seeds 0 1 --scale 0.02 --eval-limit 8 --out runs/grid
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from coevo.methods.sample import SampleSettings
from coevo.run.config import (
    METHODS,
    ConfigError,
    RunConfig,
    from_stored,
    load_config,
    merge_overrides,
    parse_assignment,
    validate,
)
from coevo.run.runner import Runner, summary
from coevo.run.session import resume_run, start_run
from coevo.run.store import DB_NAME, RunStore, StoreError
from coevo.stats import compare_paired
from tasks import TASK_NAMES, get_task

CONFIGS = Path(__file__).resolve().parent / "configs"
COMPARISONS = (("eoh+es", "eoh"), ("sample+es", "sample"), ("coevo", "eoh"), ("coevo", "eoh+es"))
"""(treatment, baseline) pairs: each ES method against the same loop with a fixed model."""


class GridError(Exception):
    """A grid that cannot run as asked; reported as one line, exit 2."""


@dataclass(frozen=True)
class Setting:
    task: str
    method: str
    budget: int
    """The reference budget; the run's own budget is this times --scale."""
    seed: int

    def run_dir(self, out: Path) -> Path:
        return out / "runs" / self.task / self.method.replace("+", "_") / f"b{self.budget}-s{self.seed}"


@dataclass(frozen=True)
class RunResult:
    task: str
    method: str
    budget: int
    seed: int
    evaluations: int
    status: str
    objective: float | None
    gap_pct: float | None
    run_dir: str
    outcome: str
    """What this invocation did: 'ran', 'resumed' or 'skipped' (finished before)."""


# --- configs and plans -----------------------------------------------------------------------------
def scaled(value: int, scale: float) -> int:
    """A size times `scale`, rounded to an even number (ES members come in mirrored pairs), at least 2."""
    return max(2, 2 * round(value * scale / 2))


def pool_for(settings: dict, pairs: int) -> dict:
    """`coevo`'s settings with a prompt pool that spreads `pairs` mirrored pairs evenly (at most its own)."""
    if "prompt_pool" not in settings:
        return settings
    pool = min(settings["prompt_pool"], pairs)
    while pairs % pool:
        pool -= 1
    return {**settings, "prompt_pool": pool}


def build_config(setting: Setting, configs: Path, scale: float, assignments: Sequence[str] = ()) -> RunConfig:
    """The setting's reference config with its budget, seed and sizes scaled, then `key=value` overrides."""
    base = load_config(configs / f"{setting.task}__{setting.method.replace('+', '_')}.toml")
    data = base.model_dump(mode="json")
    data.update(
        budget=max(1, round(setting.budget * scale)),
        seed=setting.seed,
        population_size=scaled(base.population_size, scale),
    )
    if base.method in ("sample", "sample+es"):
        data["settings"] = {**base.settings, "batch": scaled(SampleSettings.model_validate(base.settings).batch, scale)}
    merged = merge_overrides(data, list(assignments))
    if not any(parse_assignment(text)[0] == ["settings", "prompt_pool"] for text in assignments):
        pairs = merged["population_size"] * merged["es"]["directions_per_parent"] // 2
        merged["settings"] = pool_for(merged["settings"], pairs)  # after --set population_size, which it follows
    return validate(merged)


def overrides(options: argparse.Namespace) -> list[str]:
    """--model, --eval-limit and --set as config assignments, in that order."""
    assignments = [] if options.model is None else [f"model={json.dumps(options.model)}"]
    if options.eval_limit is not None:
        assignments.append(f"eval.limit={options.eval_limit}")
    return assignments + options.set


def run_state(run_dir: Path, config: RunConfig) -> str:
    """'new', 'unfinished' or 'finished'; a directory holding another config's run is an error."""
    if not (run_dir / DB_NAME).exists():
        return "new"
    store = RunStore.open(run_dir)
    try:
        stored = validate(from_stored(store.config)).model_dump(mode="json")  # keys added since take defaults
        if stored != config.model_dump(mode="json"):
            raise GridError(f"{run_dir} holds a run with another config; choose another --out or remove it")
        return "finished" if store.meta("status") == "finished" else "unfinished"
    finally:
        store.close()


# --- running ---------------------------------------------------------------------------------------
def execute(runner: Runner, on_progress: Callable[[Runner], None]) -> None:
    """Run to the end of the budget and release the run's sandbox and database."""
    with runner:
        runner.on_progress = on_progress
        on_progress(runner)
        runner.run()


def run_grid(plan: Sequence[tuple[Setting, RunConfig, str]], out: Path, console: Console) -> dict[Setting, str]:
    """Run every planned setting that is not finished; returns what happened to each
    ('skipped', 'ran', 'resumed' or 'failed: <reason>'). A failing run does not stop the grid."""
    outcomes: dict[Setting, str] = {}
    todo = [(setting, config, state) for setting, config, state in plan if state != "finished"]
    outcomes.update({setting: "skipped" for setting, _, state in plan if state == "finished"})
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        grid_bar = progress.add_task("grid", total=len(todo), detail="runs")
        run_bar = progress.add_task("", total=1, detail="")
        for setting, config, state in todo:
            label = f"{setting.method} {setting.task} b{setting.budget} s{setting.seed}"
            progress.reset(run_bar, total=config.budget, description=label, detail="evals")

            def update(runner: Runner) -> None:
                best = "-" if runner.best is None else f"{runner.best.objective:.5g}"
                progress.update(
                    run_bar, completed=runner.evaluations, detail=f"evals, gen {runner.generation}, best {best}"
                )

            run_dir = setting.run_dir(out)
            started = time.monotonic()
            try:
                execute(start_run(config, run_dir) if state == "new" else resume_run(run_dir), update)
                outcomes[setting] = "ran" if state == "new" else "resumed"
            except (ConfigError, StoreError):  # a missing model or unreadable store stops every run alike
                raise
            except Exception as exc:  # one broken run must not cost the rest of the grid
                outcomes[setting] = f"failed: {exc}"
            console.log(f"{label}: {outcomes[setting]} in {time.monotonic() - started:.0f} s")
            progress.advance(grid_bar)
    return outcomes


def collect(setting: Setting, out: Path, outcome: str) -> RunResult:
    store = RunStore.open(setting.run_dir(out))
    try:
        facts = summary(store)
    finally:
        store.close()
    answer = facts["best"] or {}
    best = answer.get("figures", {}).get("search", {})  # grid runs are not validated: the best on search
    return RunResult(
        task=setting.task,
        method=setting.method,
        budget=setting.budget,
        seed=setting.seed,
        evaluations=facts["evaluations"],
        status=facts["status"],
        objective=best.get("objective"),
        gap_pct=best.get("gap_pct"),
        run_dir=str(setting.run_dir(out)),
        outcome=outcome,
    )


# --- tables ----------------------------------------------------------------------------------------
def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None where undefined)."""
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else None


def cells(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One row per (task, budget, method): best objective and gap, mean +- std over finished seeds."""
    groups: dict[tuple[str, int, str], list[RunResult]] = defaultdict(list)
    for result in results:
        groups[(result.task, result.budget, result.method)].append(result)
    rows = []
    for (task, budget, method), runs in groups.items():
        objectives = [r.objective for r in runs if r.objective is not None]
        gaps = [r.gap_pct for r in runs if r.gap_pct is not None]
        objective_mean, objective_std = mean_std(objectives)
        gap_mean, gap_std = mean_std(gaps)
        rows.append(
            {
                "task": task,
                "budget": budget,
                "method": method,
                "runs": len(runs),
                "valid_runs": len(objectives),
                "evaluations": max(r.evaluations for r in runs),
                "objective_mean": objective_mean,
                "objective_std": objective_std,
                "gap_mean": gap_mean,
                "gap_std": gap_std,
            }
        )
    return rows


def improvement(treatment: RunResult, baseline: RunResult) -> float:
    """Relative improvement of the treatment's best over the baseline's, in % (positive: better);
    a run without any valid heuristic loses to any run with one."""
    if treatment.objective is None or baseline.objective is None:
        if treatment.objective is None and baseline.objective is None:
            return 0.0
        return -math.inf if treatment.objective is None else math.inf
    sign = -1.0 if get_task(treatment.task).sense == "max" else 1.0
    return sign * (baseline.objective - treatment.objective) / (abs(baseline.objective) or 1.0) * 100


def comparisons(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """The matched comparisons whose two methods are both in the grid, paired by (task, budget, seed)."""
    by_key = {(r.method, r.task, r.budget, r.seed): r for r in results}
    rows = []
    for treatment, baseline in COMPARISONS:
        pairs = [
            (result, by_key[(baseline, *key)])
            for (method, *key), result in by_key.items()
            if method == treatment and (baseline, *key) in by_key
        ]
        if not pairs:
            continue
        comparison = compare_paired([improvement(t, b) for t, b in pairs])
        rows.append(
            {
                "treatment": treatment,
                "baseline": baseline,
                "wins": comparison.wins,
                "ties": comparison.ties,
                "losses": comparison.losses,
                "settings": comparison.settings,
                "median_improvement_pct": finite_or_none(comparison.median_improvement),
                "p_value": comparison.test.p_value,
                "test": comparison.test.method,
                "test_n": comparison.test.n,
                "sentence": f"{treatment} vs {baseline}: {comparison.sentence()}",
            }
        )
    return rows


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def figure(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.4g}" if std is None else f"{mean:.4g} ± {std:.2g}"


def markdown(
    command: str,
    options: argparse.Namespace,
    cell_rows: list[dict[str, Any]],
    comparison_rows: list[dict[str, Any]],
    failures: dict[str, str],
) -> str:
    methods = [m for m in METHODS if m in options.methods]
    lines = [
        "# coevo grid",
        "",
        f"`{command}`",
        "",
        f"Budgets and population sizes scaled by {options.scale:g}; model {options.model or 'from the configs'}; "
        f"search split{'' if options.eval_limit is None else f', first {options.eval_limit} instances'}.",
        "Each cell: best search objective, mean ± std over seeds (gap % to the task's reference below it).",
        "",
        "| task | budget | evals | " + " | ".join(methods) + " |",
        "|---" * (3 + len(methods)) + "|",
    ]
    by_cell = {(row["task"], row["budget"], row["method"]): row for row in cell_rows}
    for task, budget in sorted({(row["task"], row["budget"]) for row in cell_rows}):
        row_cells = [by_cell.get((task, budget, method)) for method in methods]
        evaluations = max(cell["evaluations"] for cell in row_cells if cell is not None)
        entries = [
            "-"
            if cell is None
            else f"{figure(cell['objective_mean'], cell['objective_std'])}<br>({figure(cell['gap_mean'], cell['gap_std'])} %)"
            for cell in row_cells
        ]
        lines.append(f"| {task} | {budget} | {evaluations} | " + " | ".join(entries) + " |")
    lines += [
        "",
        "## Matched comparisons (paired over task x budget x seed)",
        "",
        "Improvement: relative change of the best search objective in % (positive: the treatment is better);",
        "Wilcoxon signed-rank test over the paired improvements, ties dropped.",
        "",
        "| treatment vs baseline | better | ties | worse | settings | median improvement % | Wilcoxon p |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in comparison_rows:
        median = "-" if row["median_improvement_pct"] is None else f"{row['median_improvement_pct']:+.3g}"
        lines.append(
            f"| {row['treatment']} vs {row['baseline']} | {row['wins']} | {row['ties']} | {row['losses']} | "
            f"{row['settings']} | {median} | {row['p_value']:.3g} ({row['test']}, n={row['test_n']}) |"
        )
    lines += ["", *(f"- {row['sentence']}" for row in comparison_rows)]
    if failures:
        lines += ["", "## Failed runs", "", *(f"- {run}: {reason}" for run, reason in failures.items())]
    return "\n".join(lines) + "\n"


# --- command line ----------------------------------------------------------------------------------
def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="experiments/grid.py",
        description="Run methods x tasks x budgets x seeds and write OUT/grid.md and OUT/grid.json. "
        "Rerunning the same command skips finished runs and resumes unfinished ones.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(TASK_NAMES),
        choices=TASK_NAMES,
        metavar="TASK",
        help="tasks to run",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        choices=METHODS,
        metavar="METHOD",
        help="methods to run",
    )
    parser.add_argument(
        "--budgets",
        nargs="+",
        type=int,
        default=[1000, 2000],
        metavar="B",
        help="reference budgets in candidate evaluations (before --scale)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], metavar="S", help="run seeds")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiplies budgets, population_size and settings.batch (the latter two at least 2)",
    )
    parser.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="override the configs' model (embedded name, directory or module:factory)",
    )
    parser.add_argument(
        "--eval-limit",
        type=int,
        default=None,
        metavar="N",
        help="score candidates on the first N search instances only",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("runs/grid"),
        metavar="DIR",
        help="where run directories, grid.md and grid.json go",
    )
    parser.add_argument(
        "--configs",
        type=Path,
        default=CONFIGS,
        metavar="DIR",
        help="directory of <task>__<method>.toml reference configs",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key in every run, as `coevo run --set` (repeatable; applied last)",
    )
    options = parser.parse_args(argv)
    if options.scale <= 0:
        parser.error(f"--scale must be positive, got {options.scale}")
    if min(options.budgets) < 1 or min(options.seeds) < 0:
        parser.error("--budgets must be at least 1 and --seeds at least 0")
    if options.eval_limit is not None and options.eval_limit < 1:
        parser.error(f"--eval-limit must be at least 1, got {options.eval_limit}")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    options = parse_args(argv)
    console = Console(stderr=True, log_path=False)
    settings = [
        Setting(task, method, budget, seed)
        for task in options.tasks
        for budget in options.budgets
        for method in options.methods
        for seed in options.seeds
    ]
    try:
        plan = []
        for setting in settings:
            config = build_config(setting, options.configs, options.scale, overrides(options))
            plan.append((setting, config, run_state(setting.run_dir(options.out), config)))
        outcomes = run_grid(plan, options.out, console)
    except (GridError, ConfigError, StoreError) as exc:
        print(f"grid: {exc}", file=sys.stderr)
        return 2
    failures = {
        str(s.run_dir(options.out)): o.removeprefix("failed: ") for s, o in outcomes.items() if o.startswith("failed")
    }
    results = [collect(s, options.out, outcomes[s]) for s in settings if not outcomes[s].startswith("failed")]
    cell_rows, comparison_rows = cells(results), comparisons(results)
    command = shlex.join(["python", "experiments/grid.py", *argv])
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "grid.md").write_text(markdown(command, options, cell_rows, comparison_rows, failures))
    payload = {
        "command": command,
        "scale": options.scale,
        "model": options.model,
        "eval_limit": options.eval_limit,
        "runs": [asdict(r) for r in results],
        "failed": failures,
        "cells": cell_rows,
        "comparisons": comparison_rows,
    }
    (options.out / "grid.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(options.out / "grid.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
