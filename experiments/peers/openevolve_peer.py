"""Run OpenEvolve 0.4.0 on a coevo task against `coevo serve`, with coevo's evaluator functions.

    python experiments/peers/openevolve_peer.py --task tsp_construct --seed 0 --evaluations 64 \
        --base-url http://127.0.0.1:8000/v1 --model qwen-coder-0.5b --out DIR

Run from any interpreter: it installs OpenEvolve into its own venv (experiments/peers/.venvs/) on
first use and re-executes itself there. Budget: OpenEvolve counts iterations (one LLM call and one
evaluation each) and evaluates the initial program once, so `evaluations` N gives N - 1 iterations.
Full rewrites (diff_based_evolution off), as small models cannot write OpenEvolve's SEARCH/REPLACE
diffs; `concurrency` worker processes each send their own request, so the server batches them.
With --describe-task, OpenEvolve's system message is coevo's description of the task (as its own
examples set `prompt.system_message`); without it, its generic default, which names no task (the
bpp_online and tsp_construct cells of table.py ran so).
The run's seed seeds OpenEvolve's database sampling only: its top-level `random_seed` would also
become the `seed` of every LLM request, and a server that honours seeds (vLLM, `coevo serve`) then
answers the same prompt with the same text; while the database holds only the initial program every
prompt is the same, so the whole run would repeat one answer.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_cli import enforce_budget, in_peer_venv, peer_arguments  # noqa: E402

PEER = "openevolve"
FLAGS = {"--describe-task": "send the task's description as the system message (default: OpenEvolve's generic one)"}


def run(args: argparse.Namespace) -> None:
    import yaml
    from openevolve.api import run_evolution
    from openevolve.config import Config
    from scoring import seed_program, task_message

    os.environ["COEVO_PEER_TASK"] = args.task
    out = Path(args.out)
    config = {
        "max_iterations": args.evaluations - 1,
        "checkpoint_interval": args.evaluations,
        "random_seed": None,
        "log_level": "WARNING",
        "diff_based_evolution": False,
        "language": "python",
        "llm": {
            "api_base": args.base_url,
            "api_key": "coevo",
            "models": [{"name": args.model, "weight": 1.0}],
            "temperature": 0.7,
            "max_tokens": args.max_tokens,
            "timeout": args.llm_timeout,
            "retries": 1,
        },
        "database": {"population_size": 64, "num_islands": 2, "in_memory": True, "random_seed": args.seed},
        "evaluator": {"cascade_evaluation": False, "parallel_evaluations": args.concurrency},
    }
    if args.describe_task:
        config["prompt"] = {"system_message": task_message(args.task)}
    (out / "openevolve.yaml").write_text(yaml.safe_dump(config))
    enforce_budget(args)
    result = run_evolution(
        initial_program=seed_program(args.task),
        evaluator=str(Path(__file__).with_name("openevolve_evaluator.py")),
        config=Config.from_dict(config),
        output_dir=str(out / "openevolve"),
        cleanup=False,
    )
    print(f"openevolve: best combined_score {result.best_score}", flush=True)


if __name__ == "__main__":
    arguments = peer_arguments(__doc__, FLAGS)
    in_peer_venv(PEER, __file__)
    run(arguments)
