"""Run LLM4AD 1.11's EoH on a coevo task against `coevo serve`, with coevo's evaluator functions.

    python experiments/peers/llm4ad_peer.py --task tsp_construct --seed 0 --evaluations 64 \\
        --base-url http://127.0.0.1:8000/v1 --model qwen-coder-0.5b --out DIR

Installs LLM4AD into its own venv (numpy<2) on first use and re-executes itself there. LLM4AD's
`OpenAIAPI` sends only model and messages (the server's --max-tokens-cap bounds the answers);
`max_sample_nums` counts evaluated functions, the same unit as coevo's budget. Each program runs
in LLM4AD's SecureEvaluator: a new process, killed after `timeout_seconds` (LLM4AD's own default
for its TSP and bin-packing tasks, 30 s). The template is coevo's seed heuristic.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_cli import enforce_budget, in_peer_venv, peer_arguments  # noqa: E402

PEER = "llm4ad"


def run(args: argparse.Namespace) -> None:
    import random

    import numpy as np
    from llm4ad.method.eoh import EoH, EoHProfiler
    from llm4ad.tools.llm.llm_api_openai import OpenAIAPI
    from llm4ad_evaluation import CoevoTaskEvaluation

    random.seed(args.seed)
    np.random.seed(args.seed)
    llm = OpenAIAPI(base_url=args.base_url, api_key="coevo", model=args.model, timeout=args.llm_timeout)
    profiler = EoHProfiler(log_dir=str(Path(args.out) / "llm4ad"), log_style="simple", create_random_path=False)
    enforce_budget(args)
    EoH(
        llm=llm,
        evaluation=CoevoTaskEvaluation(args.task),
        profiler=profiler,  # EoH counts samples only when a profiler is given: without one it never stops
        max_generations=None,
        max_sample_nums=args.evaluations,
        num_samplers=args.concurrency,
        num_evaluators=2,
    ).run()


if __name__ == "__main__":
    arguments = peer_arguments(__doc__)
    in_peer_venv(PEER, __file__)
    run(arguments)
