"""Evaluate one candidate file through one peer's own evaluator, as that peer evaluates programs.

    <peer venv>/bin/python contain_driver.py PEER CANDIDATE.py --limit SECONDS

Prints one JSON line when the peer's evaluator has returned, then lingers a few seconds so the
harness (containment.py) can see what the evaluation left running. The task is coevo's probe task,
which tests/hostile/ targets. Run by containment.py, never by hand on a machine you share: the
peers' evaluators do not contain a fork bomb or a memory bomb.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PEERS_DIR))
LINGER_S = 4.0


def openevolve(code: str, limit: float) -> object:
    from openevolve.config import EvaluatorConfig
    from openevolve.evaluator import Evaluator

    config = EvaluatorConfig(timeout=int(max(1, limit)), cascade_evaluation=False, max_retries=0)
    evaluator = Evaluator(config, str(PEERS_DIR / "openevolve_evaluator.py"))
    return asyncio.run(evaluator.evaluate_program(code, "hostile"))


def llm4ad(code: str, limit: float) -> object:
    from llm4ad.base import SecureEvaluator
    from llm4ad_peer import make_evaluation

    return SecureEvaluator(make_evaluation("probe", timeout_s=limit)).evaluate_program(code)


def shinka(code: str, limit: float) -> object:
    from shinka.launch import JobScheduler, LocalJobConfig

    seconds = int(max(1, limit))
    job = LocalJobConfig(eval_program_path=str(PEERS_DIR / "shinka_evaluate.py"), time=f"00:00:{seconds:02d}")
    work = Path(tempfile.mkdtemp(prefix="coevo-shinka-"))
    program = work / "main.py"
    program.write_text(code)
    results, _ = JobScheduler(job_type="local", config=job, verbose=False).run(str(program), str(work / "results"))
    return results.get("correct")


def coevo(code: str, limit: float) -> object:
    from coevo.evaluate import Evaluator
    from coevo.evaluate.probe import ProbeTask
    from coevo.evaluate.sandbox import Limits

    limits = Limits(instance_seconds=limit, candidate_seconds=limit)
    with Evaluator(ProbeTask(), limits=limits, workers=1) as evaluator:
        return evaluator.evaluate(code).reason


EVALUATE = {"coevo": coevo, "openevolve": openevolve, "llm4ad": llm4ad, "shinka": shinka}
PRELOAD = {
    "coevo": ["numpy"],
    "openevolve": ["openevolve.config", "openevolve.evaluator", "scoring"],
    "llm4ad": ["llm4ad.base", "llm4ad_peer", "scoring"],
    "shinka": ["shinka.launch", "scoring"],
}
"""Imported before the clock starts: only the evaluation itself is timed."""

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=EVALUATE)
    parser.add_argument("candidate")
    parser.add_argument("--limit", type=float, default=3.0)
    args = parser.parse_args()
    os.environ["COEVO_PEER_TASK"] = "probe"
    if args.peer == "coevo":
        sys.path.insert(0, str(PEERS_DIR.parents[1]))
        PRELOAD["coevo"] += ["coevo.evaluate"]
    for module in PRELOAD[args.peer]:
        importlib.import_module(module)
    started = time.monotonic()
    try:
        verdict = repr(EVALUATE[args.peer](Path(args.candidate).read_text(), args.limit))[:300]
    except BaseException as error:  # noqa: BLE001 (what escaped the peer's evaluator is part of the finding)
        verdict = f"raised {type(error).__name__}: {error}"[:300]
    print(json.dumps({"returned_after_s": time.monotonic() - started, "verdict": verdict}), flush=True)
    time.sleep(LINGER_S)
