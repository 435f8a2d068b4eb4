"""Does ES make the mutation operator itself better on tasks it never saw? The protocol's `operator_heldout`
(PROTOCOL.md, section 3): the same m1/m2 prompts and sampling seeds answered under the base weights and
under a run's trained weights, on the seed heuristics of tasks whose prompts ES never saw.

    python experiments/evidence/operator_heldout.py RUN_DIR --tasks tsp_construct kp_construct \\
        [--per-task 100] [--in-task] [--name eoh+es/s0]

Each answer is scored on its task's search instances, as runs score children. Two endpoints per answer,
paired by answer (same prompt and stream on both sides, only the weights differ): valid code, and better
than its parent (the seed heuristic) on search. Trained vs base by exact two-sided McNemar, Holm-corrected
over the two endpoints. `--in-task` adds the run's own task (not held out; reported apart, no test
shares its answers). Writes the per-answer records and the tests under `operator_heldout` in the
evidence file.
"""

from __future__ import annotations

import sys
from typing import Any

from evidence_file import merge, read
from seed_answers import answered, config_sampling, sample_count, seed_requests
from stored_run import StoredRun, parse_runs, runs_parser

from coevo.operators.eoh_operators import EoHOperators
from coevo.operators.metering import BudgetLedger
from coevo.run.build import configured_evaluator
from coevo.run.store import StoreError
from coevo.stats import holm, mcnemar_exact
from tasks import TASK_NAMES, get_task

KEY = "operator_heldout"
ENDPOINTS = ("valid", "better")


def with_better(side: dict[str, Any], seed_gap: float) -> list[dict[str, Any]]:
    """A side's answers, each marked better than the seed when it is valid with a lower search gap."""
    return [
        {**sample, "better": bool(sample["valid"] and sample["gap_pct"] is not None and sample["gap_pct"] < seed_gap)}
        for sample in side["samples"]
    ]


def paired_test(base: list[dict[str, Any]], trained: list[dict[str, Any]], endpoint: str) -> dict[str, Any]:
    """Exact McNemar of `endpoint` over answers paired by position: gained (base no, trained yes) vs lost."""
    gained = sum(not b[endpoint] and t[endpoint] for b, t in zip(base, trained, strict=True))
    lost = sum(b[endpoint] and not t[endpoint] for b, t in zip(base, trained, strict=True))
    return {
        "base": sum(b[endpoint] for b in base),
        "trained": sum(t[endpoint] for t in trained),
        "n": len(base),
        "gained": gained,
        "lost": lost,
        "p": mcnemar_exact(gained, lost),
    }


def task_answers(run: StoredRun, task_name: str, per_task: int) -> dict[str, Any]:
    """Base and trained answers to `per_task` m1/m2 prompts on `task_name`'s seed heuristic."""
    task = get_task(task_name)
    config = run.config.model_copy(update={"task": task_name})
    with configured_evaluator(config, "search") as evaluator:
        requests, seed_gap = seed_requests(task, evaluator, per_task)
        sides = {}
        for side, replayed in (("base", False), ("trained", True)):
            llm, sha = run.model(replayed)
            operators = EoHOperators(llm, task, BudgetLedger(), sampling=config_sampling(run.config))
            answers = answered(operators, requests, evaluator)
            sides[side] = {"weights_sha256": sha, "samples": with_better(answers, seed_gap)}
            print(f"{task_name} {side}: valid {answers['valid_rate']:.2f}", file=sys.stderr, flush=True)
    return {"seed_gap_pct": seed_gap, **sides}


def tests(answers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Both endpoints over the tasks' answers pooled, Holm-corrected together."""
    base = [s for task in answers.values() for s in task["base"]["samples"]]
    trained = [s for task in answers.values() for s in task["trained"]["samples"]]
    results = {endpoint: paired_test(base, trained, endpoint) for endpoint in ENDPOINTS}
    adjusted = holm({endpoint: result["p"] for endpoint, result in results.items()})
    return {endpoint: {**result, "p_holm": adjusted[endpoint]} for endpoint, result in results.items()}


def measure(run: StoredRun, held_out: list[str], per_task: int, in_task: bool) -> dict[str, Any]:
    """The held-out tasks' answers and tests, and the run's own task apart when `in_task`."""
    if run.config.task in held_out:
        raise StoreError(f"{run.config.task} is the run's own task: its prompts are not held out")
    answers = {task: task_answers(run, task, per_task) for task in held_out}
    figures: dict[str, Any] = {
        "run": str(run.path),
        "trained_on": run.config.task,
        "updates": len(run.records),
        "directed_updates": sum(record.has_direction for record in run.records),
        "held_out": {"tasks": answers, "tests": tests(answers)},
    }
    if in_task:
        own = {run.config.task: task_answers(run, run.config.task, per_task)}
        figures["in_task"] = {"tasks": own, "tests": tests(own)}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = runs_parser(__doc__.splitlines()[0], "one finished AHD run with ES updates", default_names="method/sSEED")
    parser.add_argument("--tasks", nargs="+", required=True, choices=TASK_NAMES, help="held-out tasks")
    parser.add_argument("--per-task", type=sample_count, default=100, help="answers per task (default: 100)")
    parser.add_argument("--in-task", action="store_true", help="also answer the run's own task's prompts")
    args = parse_runs(parser, argv)
    if len(args.run_dirs) != 1:
        parser.error("measure one run per call: each run is its own trained side")
    try:
        run = StoredRun.open(args.run_dirs[0])
        figures = measure(run, args.tasks, args.per_task, args.in_task)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    name = (args.name or [f"{run.config.method}/s{run.config.seed}"])[0]
    merge(KEY, {**read(KEY, args.results), name: figures}, args.results)
    for endpoint, result in figures["held_out"]["tests"].items():
        print(
            f"{name} held out, {endpoint}: base {result['base']}/{result['n']}, trained {result['trained']}/{result['n']}"
            f" (gained {result['gained']}, lost {result['lost']}; McNemar p {result['p']:.3g}, Holm {result['p_holm']:.3g})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
