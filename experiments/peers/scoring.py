"""Score a candidate program with coevo's own task functions, inside a peer framework's evaluator.

Every peer calls `score_program` from the evaluator it runs the way it runs evaluators (OpenEvolve:
in its worker, under its timeout; LLM4AD: in a new process under its timeout; ShinkaEvolve: as a
script killed on a wall-clock limit), so containment stays the peer's own, while the instances
(coevo's search split), the validator and the gap are coevo's for every system. Only `tasks` and
numpy are imported: this module runs in the peers' venvs (llm4ad's has numpy<2).

Each call appends one line to the JSONL file named by $COEVO_PEER_LOG (time, validity, gap, code),
which is how the runner counts evaluations, draws best gap against evaluations and picks the
winner that coevo then scores on val and test.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import importlib.util  # noqa: E402

from tasks import TASK_NAMES  # noqa: E402  (the repository root is on the path from here on)
from tasks import get_task as _registered_task  # noqa: E402
from tasks.base import Task  # noqa: E402
from tasks.references import gap_pct, group_references  # noqa: E402

PROBE_FILE = REPO / "coevo" / "evaluate" / "probe.py"
PYPROJECT = REPO / "pyproject.toml"

LOG_ENV = "COEVO_PEER_LOG"
INVALID_SCORE = -1e9
"""What peers are told an invalid program scored: far below any real negated gap."""


def declared_task(name: str) -> str:
    """The `module:Class` that the repository's pyproject.toml registers for a task name (`name` itself
    if it registers none): the peers' venvs do not install coevo, so its entry points are missing there."""
    import tomllib

    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["coevo.tasks"]
    return declared.get(name, name)


def get_task(name: str) -> Task:
    """A task by name, registered here or declared in pyproject.toml; "probe" is coevo's sandbox-test
    task (tests/hostile/ targets it), loaded from its file because importing the coevo package needs
    more than the peers' venvs hold."""
    if name != "probe":
        return _registered_task(name if name in TASK_NAMES else declared_task(name))
    spec = importlib.util.spec_from_file_location("coevo_probe", PROBE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ProbeTask()


def seed_program(task_name: str) -> str:
    """The task's shipped seed heuristic: every system starts from it."""
    return get_task(task_name).seed_code()


def task_message(task_name: str) -> str:
    """What a peer is told the task is: coevo's description of it and the function to write."""
    task = get_task(task_name)
    return f"{task.description}\nWrite the Python function `{task.signature}`."


def _heuristic(code: str, function_name: str) -> Any:
    namespace: dict[str, Any] = {"__name__": "candidate"}
    exec(compile(code, "<candidate>", "exec"), namespace)  # noqa: S102 (the peer's evaluator is the container)
    function = namespace.get(function_name)
    if not callable(function):
        raise ValueError(f"the program defines no function {function_name}")
    return function


def score_program(task_name: str, code: str, split: str = "search") -> dict[str, Any]:
    """{"valid", "gap_pct", "combined_score", "reason"} of `code` on the task's split; logs the call."""
    started = time.time()
    task = get_task(task_name)
    try:
        heuristic = _heuristic(code, task.function_name)
        objectives, references = [], []
        for group in task.groups(split):  # type: ignore[arg-type]
            for instance in group.instances:
                objectives.append(float(task.score(instance, task.construct(heuristic, instance))))
            if task.name != "probe":  # the probe task has no shipped references: its score is the objective
                references.extend(group_references(task, split, group))  # type: ignore[arg-type]
        gap = gap_pct(objectives, references, task.sense) if references else sum(objectives) / len(objectives)
        if not math.isfinite(gap):
            raise ValueError(f"the gap is {gap}")
        verdict = {"valid": True, "gap_pct": gap, "combined_score": -gap, "reason": None}
    except Exception as error:  # noqa: BLE001 (any failure of a candidate is an invalid candidate)
        verdict = {
            "valid": False,
            "gap_pct": None,
            "combined_score": INVALID_SCORE,
            "reason": f"{type(error).__name__}: {error}"[:300],
        }
    log = os.environ.get(LOG_ENV)
    if log:
        line = {"started": started, "seconds": time.time() - started, "pid": os.getpid(), **verdict, "code": code}
        with open(log, "a") as handle:
            handle.write(json.dumps(line) + "\n")
    return verdict
