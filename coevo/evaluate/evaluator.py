"""The shared evaluator: one task and split, many candidates, cached and in parallel.

A candidate passes the static policy check, runs in the sandbox (which returns raw solutions),
and is then scored here, in the trusted process, by the task's own validator. The candidate
never reports its own objective.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from coevo import pyast
from coevo.evaluate.cache import ResultCache, cache_key
from coevo.evaluate.policy import RejectedCode, check_code
from coevo.evaluate.sandbox import InstancePayload, Limits, Sandbox, SandboxResult
from tasks import get_task
from tasks.base import Instance, InvalidSolution, SplitName, Task, definition_hash, instance_hash
from tasks.references import MissingReferences, gap_pct, group_references

JSON_FIELDS = ("task", "split", "valid", "objective", "gap_pct", "n_instances", "reason", "seconds")
"""The keys of ``EvalResult.to_json``: the ``coevo tasks eval --json`` contract."""


@dataclass(frozen=True)
class EvalResult:
    """The verdict on one candidate over one instance set."""

    task: str
    split: str
    valid: bool
    objective: float | None
    """Mean objective over the instances, in the task's natural sign (see ``Task.sense``)."""
    gap_pct: float | None
    """Percentage gap to the shipped reference values; None where none are shipped."""
    n_instances: int
    reason: str | None
    """Why the candidate is invalid; None when valid."""
    seconds: float
    per_instance: tuple[float, ...]
    code_hash: str

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in JSON_FIELDS}


def default_limits(task: Task, n_instances: int) -> Limits:
    """The task's per-instance limit, and half the worst case for the whole candidate.

    A candidate that spends more than half its per-instance allowance on every instance is too slow
    to be useful, so it is cut early instead of holding a worker for the full worst case.
    """
    return Limits(
        instance_seconds=task.instance_seconds,
        candidate_seconds=max(task.instance_seconds, task.instance_seconds * n_instances / 2),
    )


class Evaluator:
    """Evaluates candidate code for one task and split; use as a context manager.

    ``limit`` keeps only the first N instances of the split. ``static_check=False`` skips the
    static policy check and exists only to test the sandbox's run-time layers on their own;
    ``python_guards=False`` also drops the run-time Python guards (candidates get the real
    builtins), to test that the kernel layers hold on their own; ``skipped_layers`` leaves
    kernel layers out (``Sandbox``), to test the layering a machine without them gets.
    """

    def __init__(
        self,
        task: Task | str,
        split: SplitName = "search",
        *,
        limit: int | None = None,
        limits: Limits | None = None,
        workers: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        static_check: bool = True,
        python_guards: bool = True,
        skipped_layers: frozenset[str] = frozenset(),
    ) -> None:
        self.task = get_task(task) if isinstance(task, str) else task
        self.split = split
        self.workers = workers or os.cpu_count() or 1
        self.static_check = static_check and python_guards
        self.python_guards = python_guards
        self.skipped_layers = skipped_layers
        self._cache = ResultCache(cache_dir)
        self._groups = self.task.groups(split)
        self._instances: list[Instance] = []
        self._labels: list[str] = []
        for group in self._groups:
            self._instances.extend(group.instances)
            self._labels.extend([group.label] * len(group.instances))
        if limit is not None:
            if limit < 1:
                raise ValueError(f"limit must be at least 1, got {limit}")
            del self._instances[limit:], self._labels[limit:]
        self.limits = limits or default_limits(self.task, len(self._instances))
        self._payload = InstancePayload.of(self._instances)
        self.instance_set_hash = instance_hash(self._instances)
        self._verdict_context = self._context_key()
        self._sandbox = Sandbox(
            self.task, self._payload, parallel=self.workers, python_guards=python_guards, skipped_layers=skipped_layers
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._sandbox.close()

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    @property
    def n_instances(self) -> int:
        return len(self._instances)

    def evaluate(self, code: str) -> EvalResult:
        """The cached verdict on ``code``, computing it if needed."""
        digest = pyast.source_sha256(code)
        key = cache_key(digest, self._verdict_context)
        cached = self._cache.get(key)
        if cached is not None:
            return EvalResult(**{**cached, "per_instance": tuple(cached["per_instance"])})
        result = self._evaluate(code, digest)
        self._cache.put(key, dict(vars(result)))  # every field is immutable: no deep copy needed
        return result

    def _context_key(self) -> str:
        """Everything but the code that a verdict depends on (see ``cache``)."""
        layering = f"python guards {self.python_guards}, left out {sorted(self.skipped_layers)}, as root {os.geteuid() == 0}"
        return cache_key(
            definition_hash(type(self.task)),
            self.task.name,
            self.split,
            self.instance_set_hash,
            "\x1e".join(self._labels),
            repr(self.limits),
            layering,
        )

    def evaluate_many(self, codes: Sequence[str]) -> list[EvalResult]:
        """Verdicts in input order; distinct candidates run in parallel on ``workers`` cores."""
        unique = list(dict.fromkeys(codes))
        with ThreadPoolExecutor(max_workers=min(self.workers, max(1, len(unique)))) as pool:
            results = dict(zip(unique, pool.map(self.evaluate, unique)))
        return [results[code] for code in codes]

    def _evaluate(self, code: str, digest: str) -> EvalResult:
        started = time.perf_counter()

        def verdict(reason: str | None, objectives: Sequence[float] = ()) -> EvalResult:
            return self._result(digest, reason, list(objectives), time.perf_counter() - started)

        if self.static_check:
            try:
                check_code(code, self.task.function_name)
            except RejectedCode as rejected:
                return verdict(str(rejected))
        outcome = self._sandbox.run(self.task.module_source(code), self.limits)
        if outcome.failure is not None:
            return verdict(self._where(outcome.failed_index, outcome.failure))
        objectives, reason = self._score(outcome)
        return verdict(reason, objectives)

    def _score(self, outcome: SandboxResult) -> tuple[list[float], str | None]:
        """Re-validate every solution with the task, in this trusted process."""
        objectives = []
        for index, (instance, solution) in enumerate(zip(self._instances, outcome.solutions)):
            try:
                value = float(self.task.score(instance, solution))
            except InvalidSolution as invalid:
                return [], self._where(index, str(invalid))
            except Exception as error:  # noqa: BLE001 - malformed solutions can trip the validator
                return [], self._where(index, f"the solution broke the validator: {type(error).__name__}: {error}")
            if not math.isfinite(value):
                return [], self._where(index, f"the objective is {value}")
            objectives.append(value)
        return objectives, None

    def _where(self, index: int | None, reason: str) -> str:
        if index is None:
            return reason
        return f"instance {index + 1}/{self.n_instances} ({self._labels[index]}): {reason}"

    def _result(self, digest: str, reason: str | None, objectives: list[float], seconds: float) -> EvalResult:
        valid = reason is None
        references = self._reference_values if valid else None
        return EvalResult(
            task=self.task.name,
            split=self.split,
            valid=valid,
            objective=float(np.mean(objectives)) if valid else None,
            gap_pct=gap_pct(objectives, references, self.task.sense) if references is not None else None,
            n_instances=self.n_instances,
            reason=reason,
            seconds=round(seconds, 6),
            per_instance=tuple(objectives),
            code_hash=digest,
        )

    @functools.cached_property
    def _reference_values(self) -> np.ndarray | None:
        """The shipped references of the evaluated instances, or None where none are shipped."""
        values, remaining = [], self.n_instances
        try:
            for group in self._groups:
                if remaining <= 0:
                    break
                values.extend(group_references(self.task, self.split, group)[:remaining])
                remaining -= len(group.instances)
        except MissingReferences:  # a mismatch (drifted instances) is a bug and propagates
            return None
        return np.asarray(values)
