"""Each system's own evaluator, built once and called per program, on coevo's probe task.

    <venv python> evaluators.py SYSTEM CANDIDATE.py --limit SECONDS   # containment.py: one case
    <venv python> evaluators.py SYSTEM --serve --limit SECONDS        # peers_sandbox.py: timed batches

One case: prints "ready" once set up, one JSON line once the evaluator has returned, then lingers a few seconds so the
harness (containment.py) can see what the evaluation left running. --serve: reads a count N per
line on stdin, evaluates N distinct trivial candidates, prints the seconds they took. Never run a
hostile case by hand on a machine you share: the peers' evaluators do not contain a fork bomb or a
memory bomb. The probe task is what tests/hostile/ targets; its trivial candidate measures overhead.
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
from collections.abc import Callable
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(PEERS_DIR), str(PEERS_DIR.parents[1])]
LINGER_S = 12.0
SETTLE_S = 1.0
Evaluate = Callable[[str], object]


def candidate_threads() -> int:
    """Threads of this process still executing candidate code (scoring.py compiles it as "<candidate>"):
    a timed-out evaluation abandoned rather than killed, sleeping or not."""
    count = 0
    for frame in sys._current_frames().values():
        while frame is not None and frame.f_code.co_filename != "<candidate>":
            frame = frame.f_back
        count += frame is not None
    return count


def openevolve(limit: float) -> Evaluate:
    """OpenEvolve's Evaluator: the evaluator file's evaluate() in a thread, under asyncio.wait_for."""
    from openevolve.config import EvaluatorConfig
    from openevolve.evaluator import Evaluator

    config = EvaluatorConfig(timeout=int(max(1, limit)), cascade_evaluation=False, max_retries=0)
    evaluator = Evaluator(config, str(PEERS_DIR / "openevolve_evaluator.py"))
    return lambda code: asyncio.run(evaluator.evaluate_program(code, "probe"))


def llm4ad(limit: float) -> Evaluate:
    """LLM4AD's SecureEvaluator: a new process per program, terminated after timeout_seconds."""
    from llm4ad.base import SecureEvaluator
    from llm4ad_evaluation import CoevoTaskEvaluation

    return SecureEvaluator(CoevoTaskEvaluation("probe", timeout_s=limit)).evaluate_program


def shinka(limit: float) -> Evaluate:
    """ShinkaEvolve's local JobScheduler as its runner drives it: submit the evaluation script, poll
    `check_job_status` (which kills the process past the job time), then read the results. (The
    scheduler's blocking `run()` never applies the time limit; the evolution runner does not use it.)"""
    from types import SimpleNamespace

    from shinka.launch import JobScheduler, LocalJobConfig

    job = LocalJobConfig(eval_program_path=str(PEERS_DIR / "shinka_evaluate.py"), time=f"00:00:{int(max(1, limit)):02d}")
    scheduler = JobScheduler(job_type="local", config=job, verbose=False)

    def evaluate(code: str) -> object:
        work = Path(tempfile.mkdtemp(prefix="coevo-shinka-"))
        (work / "main.py").write_text(code)
        started = time.time()
        process = scheduler.submit_async(str(work / "main.py"), str(work / "results"))
        running = SimpleNamespace(job_id=process, start_time=started, generation=0)
        while scheduler.check_job_status(running):
            time.sleep(0.1)
        results = scheduler.get_job_results(process, str(work / "results")) or {}
        return results.get("correct")

    return evaluate


def coevo(limit: float) -> Evaluate:
    """coevo's Evaluator: static check, then the sandbox (fork server, rlimits, seccomp, guards)."""
    from coevo.evaluate import Evaluator
    from coevo.evaluate.probe import ProbeTask
    from coevo.evaluate.sandbox import Limits

    evaluator = Evaluator(ProbeTask(), limits=Limits(instance_seconds=limit, candidate_seconds=limit), workers=1)
    return lambda code: evaluator.evaluate(code).reason


FACTORIES: dict[str, Callable[[float], Evaluate]] = {
    "coevo": coevo, "openevolve": openevolve, "llm4ad": llm4ad, "shinka": shinka,
}  # fmt: skip


def trivial(index: int) -> str:
    """A distinct trivial candidate (no system may answer it from a cache)."""
    return f"def pick(values):\n    offset = {index}\n    return offset - offset\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=FACTORIES)
    parser.add_argument("candidate", nargs="?")
    parser.add_argument("--limit", type=float, default=3.0)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    os.environ["COEVO_PEER_TASK"] = "probe"
    evaluate = FACTORIES[args.system](args.limit)  # imports and set-up happen before any clock starts
    if args.serve:
        made = 0
        for line in sys.stdin:
            started = time.perf_counter()
            for _ in range(int(line)):
                evaluate(trivial(made))
                made += 1
            print(time.perf_counter() - started, flush=True)
        sys.exit(0)
    print("ready", flush=True)
    started = time.monotonic()
    try:
        verdict = repr(evaluate(Path(args.candidate).read_text()))[:300]
    except BaseException as error:  # noqa: BLE001 (what escaped the peer's evaluator is part of the finding)
        verdict = f"raised {type(error).__name__}: {error}"[:300]
    returned_after = time.monotonic() - started
    time.sleep(SETTLE_S)
    report = {"returned_after_s": returned_after, "verdict": verdict, "candidate_threads": candidate_threads()}
    print(json.dumps(report), flush=True)
    time.sleep(LINGER_S)
    os._exit(0)  # an abandoned evaluation thread must not keep the driver alive
