"""Run ShinkaEvolve 0.0.7 on a coevo task against `coevo serve`, with coevo's evaluator functions.

    python experiments/peers/shinka_peer.py --task tsp_construct --seed 0 --evaluations 64 \\
        --base-url http://127.0.0.1:8000/v1 --model qwen-coder-0.5b --out DIR

Installs ShinkaEvolve into its own venv (httpx==0.27) on first use and re-executes itself there.
The model string is `local/<model>@<base-url>`; the cloud defaults are replaced: no embedding
model (novelty by embeddings needs a hosted embedding API), no meta-recommendation calls, full
rewrites only (patch_types=["full"]), so one LLM call makes one program. `num_generations`
counts evaluated programs, the initial one included. Each candidate is a `shinka_evaluate.py`
process, killed after the job's wall-clock limit (300 s, as OpenEvolve's default timeout).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_cli import enforce_budget, in_peer_venv, peer_arguments  # noqa: E402

PEER = "shinka"
JOB_TIME = "00:05:00"


def evolve_blocks(code: str) -> str:
    """The seed with ShinkaEvolve's EVOLVE-BLOCK markers around everything after the imports."""
    lines = code.splitlines()
    first_def = next(i for i, line in enumerate(lines) if line.startswith("def "))
    return "\n".join([*lines[:first_def], "# EVOLVE-BLOCK-START", *lines[first_def:], "# EVOLVE-BLOCK-END", ""])


def run(args: argparse.Namespace) -> None:
    import random

    import numpy as np
    from scoring import seed_program, task_message
    from shinka.core import EvolutionConfig, ShinkaEvolveRunner
    from shinka.database import DatabaseConfig
    from shinka.launch import LocalJobConfig

    random.seed(args.seed)  # ShinkaEvolve takes no seed: its island and prompt choices use the global RNGs
    np.random.seed(args.seed)
    os.environ["COEVO_PEER_TASK"] = args.task
    out = Path(args.out).resolve()
    evo = EvolutionConfig(
        task_sys_msg=task_message(args.task),
        patch_types=["full"],
        patch_type_probs=[1.0],
        num_generations=args.evaluations,
        llm_models=[f"local/{args.model}@{args.base_url}"],
        llm_dynamic_selection=None,
        llm_kwargs={"temperatures": [0.7], "max_tokens": args.max_tokens},
        meta_rec_interval=None,
        embedding_model=None,
        results_dir=str(out / "shinka"),
    )
    job = LocalJobConfig(eval_program_path=str(Path(__file__).with_name("shinka_evaluate.py")), time=JOB_TIME)
    database = DatabaseConfig(db_path=str(out / "shinka" / "programs.sqlite"))
    enforce_budget(args)
    ShinkaEvolveRunner(
        evo_config=evo,
        job_config=job,
        db_config=database,
        verbose=False,
        max_evaluation_jobs=2,
        max_proposal_jobs=args.concurrency,
        init_program_str=evolve_blocks(seed_program(args.task)),
    ).run()


if __name__ == "__main__":
    arguments = peer_arguments(__doc__)
    in_peer_venv(PEER, __file__)
    run(arguments)
