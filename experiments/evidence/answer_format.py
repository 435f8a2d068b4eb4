"""How often the model writes usable code under the operators' answer format before and after its
change: the same mutation prompts and sampling streams, only the `output_format` component differs.

    python experiments/evidence/answer_format.py [--model qwen-coder-0.5b] [--task bpp_online] [--samples 32]
        [--eval-limit N]

The former format asked for the idea inside braces "like {idea}"; small models copied the placeholder
and stopped (most of a bpp_online run's answers were a bare "{idea}"). The current format asks for the
function alone with its idea in the docstring. Writes `answer_format` in the evidence file: per format
the valid-code rate, the mean search gap of the valid answers and every sample's verdict.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from evidence_file import RESULTS, merge
from seed_answers import answered, config_sampling, sample_count, seed_requests

from coevo.operators.eoh_operators import EoHOperators
from coevo.operators.metering import BudgetLedger
from coevo.run.build import configured_evaluator, load_llm
from coevo.run.config import ConfigError, validate
from tasks import get_task

KEY = "answer_format"
FORMER_OUTPUT_FORMAT = (
    "First write the idea of your heuristic as one sentence inside curly braces, like {idea}. "
    "Then implement it as one Python function with this exact signature: `$signature`, in a single ```python block. "
    "Use only numpy and the Python standard library, import what you use, and add no explanation after the code."
)
"""The `output_format` component the operators used before, the side this measurement compares against."""


def answer_format(model: str, task: str, samples: int, eval_limit: int | None = None) -> dict[str, Any]:
    """Both formats' answers to the same requests (see the module docstring), scored on the search split
    (its first `eval_limit` instances if given)."""
    config = validate({"method": "eoh", "task": task, "model": model, "budget": samples, "eval": {"limit": eval_limit}})
    problem = get_task(task)
    operators = EoHOperators(load_llm(config), problem, BudgetLedger(), sampling=config_sampling(config))
    former = replace(operators, templates=operators.templates.with_component("output_format", FORMER_OUTPUT_FORMAT))
    with configured_evaluator(config, "search") as evaluator:
        requests, seed_gap = seed_requests(problem, evaluator, samples)
        return {
            "command": f"python experiments/evidence/answer_format.py --model {model} --task {task} --samples {samples}"
            + ("" if eval_limit is None else f" --eval-limit {eval_limit}"),
            "model": model,
            "task": task,
            "samples": samples,
            "seed_gap_pct": seed_gap,
            "former": answered(former, requests, evaluator),
            "current": answered(operators, requests, evaluator),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--task", default="bpp_online")
    parser.add_argument("--samples", type=sample_count, default=32, help="answers per format (default: 32)")
    parser.add_argument("--eval-limit", type=int, help="score on the first N search instances only")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    try:
        figures = answer_format(args.model, args.task, args.samples, args.eval_limit)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    merge(KEY, figures, args.results)
    print(f"{args.model}: valid code {figures['former']['valid_rate']:.2f} -> {figures['current']['valid_rate']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
