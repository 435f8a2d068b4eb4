"""Opening runs: the backend a config names, a new run directory, or a stored run to resume.

The checks that a user can fail (bad config, missing model, weight method on a prompt-only backend,
unreadable run directory) all raise `ConfigError` or `StoreError` before any expensive work starts.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from coevo.llm.base import LLM
from coevo.plugins import names_folder
from coevo.run.build import load_llm
from coevo.run.config import ConfigError, RunConfig, from_stored, validate
from coevo.run.executor import open_executor
from coevo.run.runner import Runner
from coevo.run.store import RunStore
from coevo.threads import configure_threads, current_choice
from tasks import UnknownTaskError
from tasks.checked import checked_task

COMPUTE_DTYPE_KEY = "compute_dtype"
"""Run-store meta key: the float type the run's in-process model computed in."""
THREADS_KEY = "torch_threads"
"""Run-store meta key: torch's thread count and why, one entry per process of the run (start, resumes)."""


def default_run_dir(config: RunConfig) -> Path:
    """runs/<subject>-<method>-s<seed>-<time>: a subject named by a plugin spec (path/file.py:Class)
    contributes its class name, one named by a folder its folder's name, so the run lands under runs/
    whatever the spec's path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    named = Path(config.subject).name if names_folder(config.subject) else config.subject.rpartition(":")[2]
    subject = re.sub(r"[^\w.-]+", "_", named)
    method = re.sub(r"[^\w.-]+", "_", config.method.rpartition(":")[2])
    return Path("runs") / f"{subject}-{method}-s{config.seed}-{stamp}"


def start_run(
    config: RunConfig, run_dir: Path, llm: LLM | None = None, executor: str = "local", address: str | None = None
) -> Runner:
    """A runner over a new store in `run_dir` (the backend is loaded unless given), playing its members
    on `executor` (`address`: the Ray cluster to join). A broken task is refused before anything is made."""
    check_task(config)
    members = open_executor(executor, config, address)
    _configure_threads(config)
    llm = llm or load_llm(config)
    store = RunStore.create(run_dir, config.model_dump(mode="json"))
    if (dtype := getattr(llm, "compute_dtype", None)) is not None:
        store.set_meta(COMPUTE_DTYPE_KEY, dtype)  # the texts depend on it; a resume computes in it again
    _record_threads(store)
    return Runner(config, store, run_dir, llm, executor=members)


def resume_run(run_dir: Path, llm: LLM | None = None, executor: str = "local", address: str | None = None) -> Runner:
    """A runner continuing the run stored in `run_dir` after its last committed step, on `executor`."""
    store = RunStore.open(run_dir)
    try:
        config = validate(from_stored(store.config))
        check_task(config)
        members = open_executor(executor, config, address)
    except ConfigError:
        store.close()
        raise
    _configure_threads(config)
    runner = Runner(config, store, run_dir, llm or load_llm(config, recorded_dtype(store)), executor=members)
    _record_threads(store)
    return runner


def check_task(config: RunConfig) -> None:
    """ConfigError (one line) when the run's task is broken: a missing member or seed heuristic, a
    generator that raises, references that do not fit, on the splits a run scores (search, val)."""
    if config.task is None:
        return
    try:
        checked_task(config.task, ("search", "val"))
    except UnknownTaskError as exc:
        raise ConfigError(str(exc)) from None


def recorded_dtype(store: RunStore) -> str:
    """The float type the stored run's model computed in, which its texts depend on."""
    try:
        return store.meta(COMPUTE_DTYPE_KEY)
    except KeyError:  # a run from before the key: they all computed in fp32
        return "float32"


def _configure_threads(config: RunConfig) -> None:
    """The config's `llm.threads`, where set, over the variable and the automatic choice."""
    if config.llm.threads is not None:
        configure_threads(config.llm.threads, "config llm.threads")


def _record_threads(store: RunStore) -> None:
    """Add this process's torch thread choice and its reason to the run's list (none where none was made)."""
    if (choice := current_choice()) is None:
        return
    try:
        records = json.loads(store.meta(THREADS_KEY))
    except KeyError:
        records = []
    store.set_meta(THREADS_KEY, json.dumps([*records, {**choice.to_json(), "at": time.time()}]))
