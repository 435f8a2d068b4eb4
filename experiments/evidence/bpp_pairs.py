"""Record the bpp_online evidence grid in the evidence file: each seed's three runs (eoh, eoh+es, coevo)
scored by their answer's gap on val and on test, and each ES arm paired with eoh of the same seed.

    python experiments/grid.py --tasks bpp_online --methods eoh eoh+es coevo --budgets 168 \\
        --seeds 0 1 2 3 4 5 --model qwen-coder-0.5b --set population_size=4 --set es.rank=4 \\
        --set es.scope=all_linear --out runs/bpp_evidence
    python experiments/evidence/bpp_pairs.py runs/bpp_evidence --budget 168

A run's answer is picked as `coevo run` picks it: its best distinct heuristics on search, scored on val,
the best there (a grid run stops before that step, so it is done here once and stored in the run).
The answer is then scored on test, which nothing chose on. A test verdict that hit a time limit is
measured once more without the cache: the grid's two streams load the cores, and a limit hit under
load says more about the machine than about the code. A seed counts once all three of its runs have
finished; the others are listed as pending and the grid resumes them. A seed whose answer is still
invalid on test is left out of the test pairs, with the reason. A run the evidence file already records
whose directory is not under OUT (it finished on another machine, or its directory was cleared) keeps
its recorded figures, so the grid can be spread over machines and sessions. The last machine's run
stores are packed in `experiments/evidence/bpp_runs.tar.xz`; `tar -xJf` it into `runs/` to re-score
them here or to resume the grid where it stopped.

Each ES run also reports how many of its updates had a direction: members that all earn the same
reward (every child a copy of its parent, or invalid while the parent is the population's worst) shape
to zero coefficients, a step that leaves the weights where they were.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evidence_file import RESULTS, merge, read

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid import Setting  # noqa: E402  (experiments/ is not a package)

from coevo.evaluate.evaluator import EvalResult
from coevo.run.build import configured_evaluator
from coevo.run.config import RunConfig, from_stored, validate
from coevo.run.store import RunStore, StoreError
from coevo.run.validation import validate_stored

TASK = "bpp_online"
BASELINE = "eoh"
TREATMENTS = ("eoh+es", "coevo")
COMMAND = (
    "python experiments/grid.py --tasks bpp_online --methods eoh eoh+es coevo --budgets {budget} "
    "--seeds {seeds} --model qwen-coder-0.5b --set population_size=4 --set es.rank=4 "
    "--set es.scope=all_linear --out {out}"
)
TIME_LIMIT_WORDS = ("timed out", "time limit")
"""What the sandbox's verdicts say when a candidate ran past its per-instance or per-candidate limit."""


def hit_time_limit(result: EvalResult) -> bool:
    """The verdict failed on a time limit, which load on the cores can cause, not on what the code did."""
    return not result.valid and any(words in (result.reason or "") for words in TIME_LIMIT_WORDS)


def answer_on_test(config: RunConfig, code: str, cache: Path) -> EvalResult:
    """The answer's verdict on test; one that hit a time limit is measured once more, uncached."""
    with configured_evaluator(config, "test", cache) as evaluator:
        result = evaluator.evaluate(code)
    if not hit_time_limit(result):
        return result
    with configured_evaluator(config, "test") as evaluator:
        return evaluator.evaluate(code)


def run_figures(run_dir: Path) -> dict[str, Any] | None:
    """A finished run's answer as gaps on val and test, and its ES updates; None while it is unfinished."""
    store = RunStore.open(run_dir)
    try:
        if store.status() != "finished":
            return None
        config = validate(from_stored(store.config))
        cache = run_dir / "eval-cache"
        validation = store.validation()
        if validation is None or validation["split"] != "val":
            with configured_evaluator(config, "val", cache) as evaluator:
                validation = asdict(validate_stored(store, config.finalists, evaluator))
        if validation["best_key"] is None:
            raise StoreError(f"{run_dir}: no finalist is valid on val")
        answer, _ = store.answer()
        test = answer_on_test(config, answer.code, cache)
        written = [c for _, c in store.candidates() if c.operator != "library"]
        records = store.es_records()
        return {
            "key": answer.key,
            "val": validation["best"]["gap_pct"],
            "test": test.gap_pct,
            "test_reason": test.reason,
            "valid_rate": sum(c.valid for c in written) / len(written) if written else None,
            "updates": len(records),
            "directed_updates": sum(r.has_direction for r in records),
        }
    finally:
        store.close()


def recorded_runs(results: Path, budget: int, key: str = TASK) -> dict[str, dict[str, Any]]:
    """The per-run figures the evidence file holds under `key` for this budget (none when it records another)."""
    recorded = read(key, results)
    grid_at_budget = COMMAND.format(budget=budget, seeds="", out="").split(" --seeds")[0]
    return recorded.get("runs", {}) if recorded.get("command", "").startswith(grid_at_budget) else {}


def grid_record(
    out: Path, budget: int, seeds: list[int], recorded: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The evidence object: per arm and seed its figures, and the val and test pairs of complete seeds.

    `recorded` holds figures measured earlier (the evidence file's `runs`), kept for runs not under `out`.
    """
    runs: dict[str, dict[str, Any]] = {}
    for method in (BASELINE, *TREATMENTS):
        for seed in seeds:
            run_dir = Setting(task=TASK, budget=budget, method=method, seed=seed).run_dir(out)
            if (run_dir / "run.sqlite").exists():
                figures = run_figures(run_dir)
            else:
                figures = (recorded or {}).get(method, {}).get(str(seed))
            if figures is not None:
                runs.setdefault(method, {})[str(seed)] = figures
    complete = [s for s in seeds if all(str(s) in runs.get(m, {}) for m in (BASELINE, *TREATMENTS))]

    def pairs(split: str) -> dict[str, list[list[float]]]:
        return {
            f"{method} vs {BASELINE}": [
                [runs[method][str(s)][split], runs[BASELINE][str(s)][split]]
                for s in complete
                if runs[method][str(s)][split] is not None and runs[BASELINE][str(s)][split] is not None
            ]
            for method in TREATMENTS
        }

    es_runs = [runs[m][str(s)] for m in TREATMENTS for s in complete]
    return {
        "command": COMMAND.format(budget=budget, seeds=" ".join(map(str, seeds)), out=out),
        "seeds": complete,
        "pending": [s for s in seeds if s not in complete],
        "updates": min((r["updates"] for r in es_runs), default=0),
        "directed_updates": [r["directed_updates"] for r in es_runs],
        "pairs": pairs("val"),
        "test_pairs": pairs("test"),
        "invalid_on_test": {
            f"{method} seed {s}": runs[method][str(s)]["test_reason"]
            for method in (BASELINE, *TREATMENTS)
            for s in complete
            if runs[method][str(s)]["test"] is None
        },
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the grid's --out directory")
    parser.add_argument("--budget", type=int, default=168)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--key", default=TASK, help=f"the evidence file's key (default: {TASK}; the second grid: bpp_online_v2)"
    )
    args = parser.parse_args(argv)
    try:
        record = grid_record(args.out, args.budget, args.seeds, recorded_runs(args.results, args.budget, args.key))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    merge(args.key, record, args.results)
    print(
        f"{args.key}: {len(record['seeds'])} complete seeds, pending {record['pending']}, {record['updates']} ES updates"
        f" ({record['directed_updates']} with a direction)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
