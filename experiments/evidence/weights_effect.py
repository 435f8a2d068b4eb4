"""What an AHD run's ES updates changed in what the model writes: the same prompts and sampling seeds
answered under the base weights and under the run's final weights, every answer scored on search.

    python experiments/evidence/weights_effect.py RUN_DIR... [--samples 16] [--name eoh+es/s0 ...]

The prompts are the mutation operators m1 and m2 (half the samples each) on the task's seed heuristic,
so both sides see identical text and sampling streams: only the weights differ. The final weights are
the base weights with the run's stored ES updates replayed, which reproduces the run's weights exactly.
Runs of one grid share their model, task, sampling, evaluation and dtype, so their base side is the same:
it is generated once per call, and each run adds only its own side. Writes per side the valid-code rate
and the mean search gap of the valid answers, and per sample both verdicts, under `ahd_weights_effect`
in the evidence file (one entry per run, named `method/sSEED` unless --name names them).
"""

from __future__ import annotations

import sys
from typing import Any

from evidence_file import merge, read
from seed_answers import answered, config_sampling, sample_count, seed_requests
from stored_run import StoredRun, parse_runs, runs_parser, same_base

from coevo.evaluate.evaluator import Evaluator
from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
from coevo.operators.metering import BudgetLedger
from coevo.run.build import configured_evaluator
from coevo.run.store import StoreError
from tasks import get_task
from tasks.base import Task

KEY = "ahd_weights_effect"


def base_setting(run: StoredRun) -> tuple[Any, ...]:
    """What the base side's answers and their verdicts depend on: equal settings give the same."""
    config, es = run.config, run.config.es
    return config.model, config.task, config.llm.model_dump(), config.eval.limit, es.rank, es.scope, run.dtype


def answers_under(
    run: StoredRun, replayed: bool, task: Task, requests: list[ProposalRequest], evaluator: Evaluator
) -> tuple[dict[str, Any], str]:
    """The requests answered under the run's base weights, or its final ones if `replayed`, and the hash
    of those weights."""
    llm, weights_sha = run.model(replayed)
    operators = EoHOperators(llm, task, BudgetLedger(), sampling=config_sampling(run.config))
    return answered(operators, requests, evaluator), weights_sha


def side_done(side: str, answers: dict[str, Any]) -> None:
    """A progress line per side: each takes minutes of generation on CPU."""
    print(f"{side}: valid {answers['valid_rate']:.2f}, mean gap {answers['mean_gap_pct']}", file=sys.stderr, flush=True)


def weights_effect(runs: list[StoredRun], samples: int) -> list[dict[str, Any]]:
    """Base against each run's final weights on the same prompts and seeds (see the module docstring)."""
    same_base(runs, base_setting, "model, task, sampling, evaluation or dtype")
    first = runs[0]
    task = get_task(first.config.task)
    with configured_evaluator(first.config, "search", first.path / "eval-cache") as evaluator:
        requests, seed_gap = seed_requests(task, evaluator, samples)
        before, base_sha = answers_under(first, False, task, requests, evaluator)
        side_done(f"base weights (1 of {len(runs) + 1})", before)
        figures = []
        for number, run in enumerate(runs, start=2):
            after, sha = answers_under(run, True, task, requests, evaluator)
            side_done(f"{run.path} ({number} of {len(runs) + 1})", after)
            figures.append(
                {
                    "run": str(run.path),
                    "updates": len(run.records),
                    "directed_updates": sum(record.has_direction for record in run.records),
                    "samples": samples,
                    "weights_changed": sha != base_sha,
                    "seed_gap_pct": seed_gap,
                    "before": before,
                    "after": after,
                }
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = runs_parser(
        __doc__.splitlines()[0], "finished AHD runs with ES updates (eoh+es, coevo)", default_names="method/sSEED"
    )
    parser.add_argument("--samples", type=sample_count, default=16, help="answers per side (default: 16)")
    args = parse_runs(parser, argv)
    try:
        runs = [StoredRun.open(run_dir) for run_dir in args.run_dirs]
        measured = weights_effect(runs, args.samples)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = args.name or [f"{run.config.method}/s{run.config.seed}" for run in runs]
    merge(KEY, {**read(KEY, args.results), **dict(zip(names, measured, strict=True))}, args.results)
    for name, figures in zip(names, measured, strict=True):
        before, after = figures["before"], figures["after"]
        print(
            f"{name}: valid {before['valid_rate']:.2f} -> {after['valid_rate']:.2f}, "
            f"mean gap {before['mean_gap_pct']} -> {after['mean_gap_pct']} after {figures['updates']} ES updates"
            f" ({figures['directed_updates']} with a direction)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
