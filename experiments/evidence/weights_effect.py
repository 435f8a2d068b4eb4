"""What an AHD run's ES updates changed in what the model writes: the same prompts and sampling seeds
answered under the base weights and under the run's final weights, every answer scored on search.

    python experiments/evidence/weights_effect.py RUN_DIR [--samples 16] [--name eoh+es/s0]

The prompts are the run's own mutation operators (m1 and m2, half the samples each) on the task's seed
heuristic, so both sides see identical text and sampling streams: only the weights differ. The final
weights are the base weights with the run's stored ES updates replayed, which reproduces the run's
weights exactly. Writes per side the valid-code rate and the mean search gap of the valid answers, and
per sample both verdicts, under `ahd_weights_effect` in the evidence file (one entry per --name).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evidence_file import RESULTS, merge, read
from seed_answers import answered, config_sampling, sample_count, seed_requests

from coevo.es.update_log import replay
from coevo.operators.eoh_operators import EoHOperators
from coevo.operators.metering import BudgetLedger
from coevo.run.build import build_host, configured_evaluator, load_llm
from coevo.run.config import from_stored, validate
from coevo.run.session import recorded_dtype
from coevo.run.store import RunStore, StoreError
from tasks import get_task

KEY = "ahd_weights_effect"


def weights_effect(run_dir: Path, samples: int) -> dict[str, Any]:
    """Base against final weights on the same prompts and seeds (see the module docstring)."""
    store = RunStore.open(run_dir)
    try:
        config = validate(from_stored(store.config))
        records = store.es_records()
        dtype = recorded_dtype(store)
    finally:
        store.close()
    if not records:
        raise StoreError(f"{run_dir}: the run made no ES update, so its weights are the base weights")
    llm = load_llm(config, dtype)
    task = get_task(config.task)
    operators = EoHOperators(llm, task, BudgetLedger(), sampling=config_sampling(config))
    with configured_evaluator(config, "search", run_dir / "eval-cache") as evaluator:
        requests, seed_gap = seed_requests(task, evaluator, samples)
        host = build_host(llm, config)
        base_sha = host.weights_sha256()
        before = answered(operators, requests, evaluator)
        replay(host, records)
        after = answered(operators, requests, evaluator)
    return {
        "run": str(run_dir),
        "updates": len(records),
        "directed_updates": sum(record.has_direction for record in records),
        "samples": samples,
        "weights_changed": host.weights_sha256() != base_sha,
        "seed_gap_pct": seed_gap,
        "before": before,
        "after": after,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished AHD run with ES updates (eoh+es, coevo, sample+es)")
    parser.add_argument("--samples", type=sample_count, default=16, help="answers per side (default: 16)")
    parser.add_argument("--name", required=True, help="the entry's name, e.g. eoh+es/s0")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    try:
        figures = weights_effect(args.run_dir, args.samples)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    merge(KEY, {**read(KEY, args.results), args.name: figures}, args.results)
    before, after = figures["before"], figures["after"]
    print(
        f"{args.name}: valid {before['valid_rate']:.2f} -> {after['valid_rate']:.2f}, "
        f"mean gap {before['mean_gap_pct']} -> {after['mean_gap_pct']} after {figures['updates']} ES updates"
        f" ({figures['directed_updates']} with a direction)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
