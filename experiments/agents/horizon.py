"""Held-out success against the horizon H for the base weights, `es` and `grpo` (issue 12's comparison).

Usage: python experiments/agents/horizon.py [--quick] [--json] [--env E] [--horizons H ...] [--seeds S ...]
       [--model M] [--population N] [--generations G] [--episodes E] [--heldout-episodes K] [--out DIR]

Per (H, seed) it runs `es` for G generations of N members x E search episodes (budget B = N x G member
evaluations), and `grpo` twice: at the matched budget B (G steps of E prompts x N completions: as many
episodes as `es`) and at the reference's budget B / 4 (the reference's ES used 4x GRPO's episodes).
Every run measures its base weights and its trained weights on the first K test episodes, so "base" is
the before-figure of the `es` runs. The table gives success as mean +- std over seeds per (H, method),
and, per budget, the paired test of `es` against `grpo` over the (H, seed) settings (coevo/stats.py).
OUT/horizon.md, OUT/horizon.json and OUT/horizon.png hold it; each run keeps its own directory under
OUT/runs, and a finished one is reused when the script runs again with the same settings.

--quick: the tests' tiny random Llama (tests/ on the path), H in {2, 4}, two seeds, 2 members x 2 generations
x 2 episodes: a check that everything runs (minutes), not a result.
Real (days of CPU; experiments/agents/RESULTS.md gives the command it was run with):
  nice -n 10 python experiments/agents/horizon.py --horizons 2 4 6 --seeds 0 1 2 --out runs/horizon
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # grid.py's table helpers

from grid import figure, mean_std, run_state  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from coevo.run.config import ConfigError, RunConfig, validate  # noqa: E402
from coevo.run.session import start_run  # noqa: E402
from coevo.run.store import RunStore  # noqa: E402
from coevo.stats import compare_paired  # noqa: E402

REFERENCE_ES_OVER_GRPO = 4
"""The reference's ES played 4x the episodes of its GRPO baseline."""


@dataclass(frozen=True)
class Arm:
    """One column of the table: a method at a budget (a multiple of the matched budget B)."""

    label: str
    method: str
    budget_fraction: float


ARMS = (Arm("es", "es", 1.0), Arm("grpo", "grpo", 1.0), Arm("grpo/4", "grpo", 1 / REFERENCE_ES_OVER_GRPO))
COMPARISONS = (("matched", "grpo"), ("reference", "grpo/4"))
"""(budget setting, the grpo arm `es` is paired with)."""


def run_config(options: argparse.Namespace, arm: Arm, horizon: int, seed: int) -> RunConfig:
    budget = options.population * options.generations
    return validate(
        {
            "method": arm.method,
            "model": options.model,
            "budget": max(options.population, round(budget * arm.budget_fraction)),
            "seed": seed,
            "population_size": options.population,
            "es": {"sigma": options.sigma, "sigma_final": options.sigma / 4, "alpha": options.alpha},
            "workload": {
                "kind": "agent",
                "env": options.env,
                "horizon": horizon,
                "episodes": options.episodes,
                "heldout": "test",
                "heldout_episodes": options.heldout_episodes,
            },
        }
    )


def play(config: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The run's held-out figures, kept in its store's meta: read back from a finished run, or measured
    by running it now (from scratch: a grpo run cannot resume, and an unfinished `es` run here costs
    little more than a fresh one)."""
    if run_state(run_dir, config) == "finished":
        store = RunStore.open(run_dir)
        try:
            return json.loads(store.meta("heldout"))
        except KeyError:
            pass
        finally:
            store.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    with start_run(config, run_dir) as runner:
        runner.run()
        runner.record_heldout("after")
        runner.store.set_meta("heldout", json.dumps(runner.heldout))
        return dict(runner.heldout)


def rate(figures: dict[str, Any]) -> float:
    return figures["successes"] / figures["episodes"]


def measure(options: argparse.Namespace, console: Console) -> list[dict[str, Any]]:
    """One row per (H, seed, arm): base and trained success on the test episodes."""
    plan = [(h, s, arm) for h in options.horizons for s in options.seeds for arm in ARMS]
    rows = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("horizon runs", total=len(plan))
        for horizon, seed, arm in plan:
            progress.update(bar, description=f"H={horizon} seed {seed} {arm.label}")
            config = run_config(options, arm, horizon, seed)
            run_dir = options.out / "runs" / f"H{horizon}" / arm.label.replace("/", "_over_") / f"s{seed}"
            heldout = play(config, run_dir)
            rows.append(
                {
                    "horizon": horizon,
                    "seed": seed,
                    "arm": arm.label,
                    "episodes_played": config.budget * options.episodes,
                    "base": rate(heldout["before"]),
                    "trained": rate(heldout["after"]),
                    "heldout_episodes": heldout["after"]["episodes"],
                }
            )
            progress.advance(bar)
    return rows


def summarise(rows: list[dict[str, Any]], horizons: list[int]) -> dict[str, Any]:
    """Mean +- std over seeds per (H, arm), base from the es runs, and the paired tests of es vs grpo."""
    table = []
    for horizon in horizons:
        at_h = [r for r in rows if r["horizon"] == horizon]
        base = mean_std([r["base"] for r in at_h if r["arm"] == "es"])
        cells = {"base": base} | {a.label: mean_std([r["trained"] for r in at_h if r["arm"] == a.label]) for a in ARMS}
        episodes = {a.label: next(r["episodes_played"] for r in at_h if r["arm"] == a.label) for a in ARMS}
        table.append({"horizon": horizon, "success": cells, "episodes_played": episodes})
    tests = {}
    for setting, grpo_arm in COMPARISONS:
        by_key = {(r["horizon"], r["seed"], r["arm"]): r["trained"] for r in rows}
        pairs = [(h, s) for (h, s, a) in by_key if a == "es" and (h, s, grpo_arm) in by_key]
        comparison = compare_paired([by_key[(h, s, "es")] - by_key[(h, s, grpo_arm)] for h, s in pairs])
        tests[setting] = {"es_vs": grpo_arm, "sentence": comparison.sentence(), "p_value": comparison.test.p_value}
    return {"table": table, "es_vs_grpo": tests}


def markdown(summary: dict[str, Any], command: str, options: argparse.Namespace) -> str:
    labels = ["base", *(a.label for a in ARMS)]
    lines = [
        f"# Test-split success against H: {options.env}, {options.model}",
        "",
        f"`{command}`",
        "",
        f"Mean ± std over seeds {options.seeds}, each on the first {options.heldout_episodes} test episodes. "
        f"es: {options.population} members x {options.generations} generations x {options.episodes} episodes; "
        "grpo: the same episodes; grpo/4: a quarter of them, at least one step (the reference's ES-to-GRPO ratio).",
        "",
        "| H | " + " | ".join(labels) + " | episodes es / grpo / grpo/4 |",
        "|---|" + "---|" * (len(labels) + 1),
    ]
    for row in summary["table"]:
        cells = [figure(*row["success"][label]) for label in labels]
        episodes = " / ".join(str(row["episodes_played"][a.label]) for a in ARMS)
        lines.append(f"| {row['horizon']} | " + " | ".join(cells) + f" | {episodes} |")
    lines.append("")
    for setting, test in summary["es_vs_grpo"].items():
        lines.append(f"- es vs {test['es_vs']} ({setting} budgets): es {test['sentence']}")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path, title: str) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 3.8))
    ax = fig.add_subplot()
    horizons = [row["horizon"] for row in summary["table"]]
    for label in ["base", *(a.label for a in ARMS)]:
        means = [row["success"][label][0] for row in summary["table"]]
        stds = [row["success"][label][1] or 0.0 for row in summary["table"]]
        ax.errorbar(horizons, means, yerr=stds, marker="o", capsize=3, label=label)
    ax.set(xlabel="horizon H", ylabel="test success", title=title, xticks=horizons)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny random model, H 2 4, two seeds: minutes")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--env", default="gridnav")
    parser.add_argument("--horizons", type=int, nargs="+")
    parser.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--model")
    parser.add_argument("--population", type=int, help="es members, and grpo completions per prompt")
    parser.add_argument("--generations", type=int, help="es generations (grpo steps at the matched budget)")
    parser.add_argument("--episodes", type=int, help="search episodes per member (grpo prompts per step)")
    parser.add_argument("--heldout-episodes", type=int, help="test episodes each run is measured on")
    parser.add_argument("--sigma", type=float, default=1e-3)
    parser.add_argument("--alpha", type=float, default=5e-4)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(argv)
    quick = {"horizons": [2, 4], "seeds": [0, 1], "model": "tiny_lm:build_tiny_agent", "population": 2,
             "generations": 2, "episodes": 2, "heldout_episodes": 4, "out": Path("runs/horizon-quick")}
    real = {"horizons": [2, 4, 6], "seeds": [0, 1, 2], "model": "smollm2-135m", "population": 8,
            "generations": 8, "episodes": 8, "heldout_episodes": 32, "out": Path("runs/horizon")}
    for key, value in (quick if options.quick else real).items():
        if getattr(options, key) is None:
            setattr(options, key, value)
    if options.quick:
        sys.path.insert(0, str(HERE.parents[1] / "tests"))  # tiny_lm
        if options.sigma == 1e-3:
            options.sigma, options.alpha = 0.5, 0.1  # a random model needs a visible step
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    console = Console(stderr=True)
    try:
        import trl  # noqa: F401
    except ImportError:
        console.print("horizon.py needs the 'rl' extra for its grpo arms: pip install 'coevo[rl]'")
        return 2
    command = "python experiments/agents/horizon.py " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        rows = measure(options, console)
    except ConfigError as exc:
        console.print(f"horizon.py: {exc}")
        return 2
    summary = summarise(rows, options.horizons) | {"runs": rows, "command": command.strip()}
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "horizon.json").write_text(json.dumps(summary, indent=2))
    (options.out / "horizon.md").write_text(markdown(summary, command.strip(), options))
    plot(summary, options.out / "horizon.png", f"{options.env}, {options.model}")
    print(json.dumps(summary) if options.json else (options.out / "horizon.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
