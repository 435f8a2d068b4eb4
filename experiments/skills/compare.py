"""No skill, `skills`, `es`, `es-then-skills` and `coevo` on one agent task at matched budgets.

Usage: python experiments/skills/compare.py [--quick] [--json] [--seeds N] [--seed K] [--model M] [--out DIR]
                                           [--record-only]

Every method gets the same budget of member evaluations (population x generations, each member playing
the generation's search episodes) and is then measured on the same held-out episodes: `es` with the
evolved weights, the skill methods with their final library (and their weights). "no skill" is the
base weights with no text, measured on those episodes once per seed (the `es` run's "before"). What each
run actually spent is counted and reported beside its result: episodes played (search, skill gates)
and LLM calls (agent turns, trajectory analyses); the held-out measurements are not counted.

Each finished (method, seed) run is recorded in DIR/records/<method>__s<seed>.json with the settings and
model it ran under; running the script again with the same DIR skips those runs (records made under
other settings are run again), so the SmolLM2 comparison can be filled in over several sessions and
`--seeds` raised later. `--record-only` writes the table from whatever records DIR holds. `--seed K` runs
only seed K's missing runs, so two processes (one torch thread each) can fill two seeds at once.

Per method: mean +- std of held-out success over seeds; against no skill and against `coevo`, the
per-seed differences with the paired test of `coevo.stats` (Wilcoxon signed rank; with few seeds it
cannot reach significance, which the table says as it is). Writes DIR/compare.md, DIR/compare.json
and DIR/compare.png (matplotlib, Agg).

--quick checks that everything runs in a few minutes: the tiny random agent of the tests, whose trajectory
analyses come from a script (tests/skills_agent_lm.py), 2 seeds, 2 generations. Its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from coevo.run.config import load_config  # noqa: E402
from coevo.run.session import start_run  # noqa: E402
from coevo.stats import compare_paired  # noqa: E402
from coevo.workloads.agents import AgentWorkload  # noqa: E402

METHODS = ("skills", "es", "es-then-skills", "coevo")
NO_SKILL = "no skill"
TINY_MODEL = "skills_agent_lm:build"

TEMPLATE = """
method = "es"
model = "smollm2-135m"
budget = {budget}
population_size = {population}
[es]
sigma = 1e-3
sigma_final = 2.5e-4
alpha = 5e-4
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = {episodes}
heldout = "val"
heldout_episodes = {heldout}
"""

SKILL_SETTINGS = """[settings]
analyses = 3
max_edits = 2
heldout_episodes = {gate}
"""
"""The skill methods' own keys (`es` takes none)."""


@dataclass(frozen=True)
class Settings:
    seeds: int
    population: int
    generations: int
    episodes: int
    heldout: int
    gate: int

    @classmethod
    def of(cls, quick: bool, seeds: int | None) -> Settings:
        if quick:
            return cls(seeds or 2, population=2, generations=2, episodes=2, heldout=4, gate=2)
        return cls(seeds or 3, population=4, generations=3, episodes=4, heldout=16, gate=4)


@dataclass
class Spent:
    episodes: int = 0
    turns: int = 0


@contextmanager
def counting() -> Iterator[Spent]:
    """Count every episode and turn the agent workload plays while the block runs, but the held-out
    measurements (the same for every method)."""
    spent, original, heldout = Spent(), AgentWorkload.episodes, AgentWorkload.heldout_episodes
    measuring = False

    def episodes(self, members):
        played = original(self, members)
        if not measuring:
            for member_episodes in played:
                spent.episodes += len(member_episodes)
                spent.turns += sum(len(e.turns) for e in member_episodes)
        return played

    def heldout_episodes(self, *args, **kwargs):
        nonlocal measuring
        measuring = True
        try:
            return heldout(self, *args, **kwargs)
        finally:
            measuring = False

    AgentWorkload.episodes, AgentWorkload.heldout_episodes = episodes, heldout_episodes
    try:
        yield spent
    finally:
        AgentWorkload.episodes, AgentWorkload.heldout_episodes = original, heldout


def one_run(method: str, seed: int, settings: Settings, model: str, workdir: Path, llm=None) -> dict:
    path = workdir / "compare.toml"
    path.write_text(
        TEMPLATE.format(
            budget=settings.population * settings.generations,
            population=settings.population,
            episodes=settings.episodes,
            heldout=settings.heldout,
        )
        + ("" if method == "es" else SKILL_SETTINGS.format(gate=settings.gate))
    )
    config = load_config(path, [f'method="{method}"', f'model="{model}"', f"seed={seed}"])
    started = time.perf_counter()
    with start_run(config, workdir / f"{method}-{seed}", llm) as runner, counting() as spent:
        runner.run()
        text_calls = runner.store.llm_totals()["calls"]
        counted = Spent(spent.episodes, spent.turns)
        before = runner.heldout["before"]
        after = runner.record_heldout("after")
        library = getattr(getattr(runner.method, "skills", None), "library", None)
    return {
        "method": method,
        "seed": seed,
        "before": before["successes"] / before["episodes"],
        "after": after.rate,
        "heldout_episodes": after.episodes,
        "episodes": counted.episodes,
        "llm_calls": counted.turns + text_calls,
        "analysis_calls": text_calls,
        "skills": [] if library is None else list(library),
        "seconds": time.perf_counter() - started,
    }


def recorded_run(
    method: str, seed: int, settings: Settings, model: str, records: Path, record_only: bool
) -> dict | None:
    """The record of run (method, seed) under these settings and model: read if it was finished before,
    else run now and written (None with `record_only` when there is none)."""
    path = records / f"{method}__s{seed}.json"
    key = {"settings": settings.__dict__ | {"seeds": None}, "model": model}
    if path.exists():
        stored = json.loads(path.read_text())
        if {k: stored.get(k) for k in key} == key:
            return stored["run"]
    if record_only:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        run = one_run(method, seed, settings, model, Path(scratch))
    path.write_text(json.dumps({**key, "run": run}, indent=2) + "\n")
    return run


def summarise(runs: list[dict]) -> dict:
    """Per arm: mean, std, spend; paired per-seed differences against no skill and against coevo."""
    by_arm: dict[str, dict[int, dict]] = {}
    for run in runs:
        by_arm.setdefault(run["method"], {})[run["seed"]] = run
    by_arm[NO_SKILL] = {
        seed: {**run, "method": NO_SKILL, "after": run["before"], "episodes": 0, "llm_calls": 0, "analysis_calls": 0}
        for seed, run in by_arm["es"].items()
    }
    arms = {}
    for arm in (NO_SKILL, *METHODS):
        seeds = sorted(by_arm[arm])
        scores = [by_arm[arm][s]["after"] for s in seeds]
        row = {
            "mean": statistics.fmean(scores),
            "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "per_seed": scores,
            "episodes": statistics.fmean(by_arm[arm][s]["episodes"] for s in seeds),
            "llm_calls": statistics.fmean(by_arm[arm][s]["llm_calls"] for s in seeds),
        }
        for label, baseline in (("vs_no_skill", NO_SKILL), ("coevo_vs", arm)):
            if arm in (NO_SKILL, "coevo"):
                continue
            treated, control = ("coevo", baseline) if label == "coevo_vs" else (arm, baseline)
            differences = [by_arm[treated][s]["after"] - by_arm[control][s]["after"] for s in seeds]
            row[label] = {"differences": differences, "sentence": compare_paired(differences).sentence()}
        if arm == "coevo":
            differences = [by_arm["coevo"][s]["after"] - by_arm[NO_SKILL][s]["after"] for s in seeds]
            row["vs_no_skill"] = {"differences": differences, "sentence": compare_paired(differences).sentence()}
        arms[arm] = row
    top = max(row["mean"] for row in arms.values())
    return {"arms": arms, "best": [arm for arm, row in arms.items() if row["mean"] == top]}


def markdown(summary: dict, settings: Settings, model: str) -> str:
    lines = [
        f"Held-out success on gridnav H=2 ({settings.heldout} val episodes), {model}, "
        f"{settings.seeds} seeds, budget {settings.population} members x {settings.generations} generations "
        f"of {settings.episodes} search episodes.",
        "",
        "| method | success mean +- std | episodes | LLM calls | vs no skill (paired) | coevo vs this (paired) |",
        "|---|---|---|---|---|---|",
    ]
    for arm, row in summary["arms"].items():
        versus = row.get("vs_no_skill", {}).get("sentence", "-")
        coevo = row.get("coevo_vs", {}).get("sentence", "-")
        lines.append(
            f"| {arm} | {row['mean']:.3f} +- {row['std']:.3f} | {row['episodes']:.0f} | {row['llm_calls']:.0f} "
            f"| {versus} | {coevo} |"
        )
    best = summary["best"]
    verdict = f"Highest mean: {best[0]}." if len(best) == 1 else f"Tied for the highest mean: {', '.join(best)}."
    lines += ["", verdict, "Episodes and LLM calls: what each run spent (search episodes, skill gates,"
              " agent turns, trajectory analyses), held-out measurements not counted."]
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> None:
    arms = list(summary["arms"])
    figure = Figure(figsize=(7, 3.5))
    axes = figure.subplots()
    axes.bar(
        arms,
        [summary["arms"][a]["mean"] for a in arms],
        yerr=[summary["arms"][a]["std"] for a in arms],
        capsize=4,
        color="#4c72b0",
    )
    axes.set_ylabel("held-out success")
    axes.set_ylim(0, 1)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="check that everything runs (tiny model)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per method")
    parser.add_argument("--seed", type=int, default=None, help="run only this seed's missing runs")
    parser.add_argument("--model", default=None, help="model (default: smollm2-135m; --quick: the tiny test agent)")
    parser.add_argument("--out", type=Path, default=Path("skills-compare"), help="where the table and plot go")
    parser.add_argument("--record-only", action="store_true", help="run nothing: the table from DIR's records")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.seed is not None and args.seed < 0:
        parser.error("--seed must be at least 0")
    settings = Settings.of(args.quick, args.seeds)
    model = args.model or (TINY_MODEL if args.quick else "smollm2-135m")
    if model == TINY_MODEL:
        import torch

        sys.path.insert(0, str(REPO / "tests"))
        torch.set_num_threads(1)  # tiny matrices: more threads only spin on a shared CPU
    records = args.out / "records"
    records.mkdir(parents=True, exist_ok=True)
    runs = []
    for seed in range(settings.seeds):
        for method in METHODS:
            skip = args.record_only or (args.seed is not None and seed != args.seed)
            runs.append(recorded_run(method, seed, settings, model, records, skip))
            if runs[-1] is not None:
                print(f"seed {seed} {method}: held-out {runs[-1]['after']:.3f}", file=sys.stderr)
    finished = [r for r in runs if r is not None]
    complete = sorted({r["seed"] for r in finished if sum(f["seed"] == r["seed"] for f in finished) == len(METHODS)})
    if not complete:
        print(f"compare: no seed has all {len(METHODS)} methods recorded in {records} yet", file=sys.stderr)
        return 2
    runs = [r for r in finished if r["seed"] in complete]
    settings = replace(settings, seeds=len(complete))  # the table speaks of the seeds it holds
    summary = {**summarise(runs), "settings": settings.__dict__, "model": model, "runs": runs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.md").write_text(markdown(summary, settings, model))
    (args.out / "compare.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(summary, args.out / "compare.png")
    print(json.dumps(summary, indent=2) if args.json else markdown(summary, settings, model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
