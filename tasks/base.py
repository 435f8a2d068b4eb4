"""The task protocol every heuristic-design problem implements.

A task is instances, a trusted driver that asks the candidate's function for decisions, and a
scorer. Only the candidate's function runs in the sandbox; everything that decides the score runs
outside it:

* ``drive`` (trusted) builds one instance's solution. It is an ``async`` function that asks
  ``await heuristic(*args)`` for each decision and checks every answer against the true state it
  holds: a candidate can only choose what its function answers.
* ``answer`` (sandbox side) calls the candidate's function for one such request and turns what it
  returned into the plain answer that crosses back (a checked number, or a decision computed from
  the function's scores). ``answer_state`` is what it keeps per instance there: large constant
  data, built once from the instance, and a mirror of the driver's state, kept current by the
  small deltas the driver sends. Whatever the sandbox does to these only misleads itself.
* ``score`` (trusted) validates the solution against the instance and computes the objective.

The framework runs many instances' drivers in lockstep and carries every step's calls to the
sandbox in one message (``coevo.evaluate``); ``construct`` runs one driver in-process, for
trusted code (shipped heuristics, tests).

Objectives are in the task's natural sign (tour length, packed value); ``sense`` says which way is
better. The reward every method optimises (higher is better) is derived from them in one place,
``coevo.candidate.fitness_of``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

SEED_DIR = Path(__file__).resolve().parent.parent / "heuristics" / "seed"

SplitName = Literal["search", "val", "test"]
SPLITS: tuple[SplitName, ...] = ("search", "val", "test")

Instance = dict[str, Any]
"""One problem instance: a flat dict of numpy arrays and scalars (picklable, hashable)."""


class InvalidSolution(Exception):
    """Raised when a heuristic's output or a returned solution breaks the task's rules.

    The message is the precise, user-facing reason (e.g. "select_next_node returned 57,
    which is not an unvisited node").
    """


@dataclass(frozen=True)
class InstanceGroup:
    """Instances that share a size inside one split (e.g. the 1000 TSP100 test instances)."""

    label: str
    instances: list[Instance] = field(repr=False)


def instance_hash(instances: list[Instance]) -> str:
    """SHA-256 over the instances' arrays in a canonical order (dtype, shape and bytes)."""
    digest = hashlib.sha256()
    for inst in instances:
        for key in sorted(inst):
            value = np.asarray(inst[key])
            digest.update(key.encode())
            digest.update(str(value.dtype).encode())
            digest.update(json.dumps(list(value.shape)).encode())
            digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


@functools.cache
def definition_hash(task_class: type) -> str:
    """SHA-256 over what defines a task class: each class of its MRO by qualified name, with the
    source file of the module that defines it (or the ``definition_version`` that class declares),
    and the ``definition_files`` it lists.

    A plugin that keeps a built-in's ``name`` but changes anything it defines hashes differently, so
    no verdict of one definition is ever taken for another's. Read once per class and process; the
    fork server reads it again and refuses to start on another definition than the evaluator's.
    """
    digest = hashlib.sha256()
    for cls in task_class.__mro__:
        if cls is object:
            continue
        digest.update(f"{cls.__module__}.{cls.__qualname__}\x1f".encode())
        declared = vars(cls).get("definition_version")
        if declared is not None:
            digest.update(f"declared {declared}\x1f".encode())
            continue
        source = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if source is None:
            raise ValueError(f"{cls.__qualname__} is defined outside any file: declare its definition_version")
        digest.update(Path(source).read_bytes())
    for path in task_class.definition_files:
        digest.update(f"{path}\x1f".encode())
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


class Call:
    """One request for the candidate's function: a driver awaits it, the framework answers it."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args

    def __await__(self) -> Generator[Call, Any, Any]:
        return (yield self)


class Heuristic:
    """A driver's handle on the candidate's function: ``await heuristic(*args)`` is one call.

    The arguments go to ``Task.answer`` next to the candidate's function. They must be plain data
    (numbers, strings, None, lists, tuples, str-keyed dicts, numeric numpy arrays; numpy scalars
    arrive as Python numbers) and small: large constant data belongs in ``Task.answer_state``.
    What the driver gets back is the plain data that ``answer`` returned, which it must check
    like any untrusted input.
    """

    def __call__(self, *args: Any) -> Call:
        return Call(args)


HEURISTIC = Heuristic()


class Task:
    """Base class of the AHD tasks. Subclasses fill in the class attributes, ``groups``, ``drive``
    and ``score``; ``answer`` and ``answer_state`` when the function is not called with the
    driver's arguments as they are."""

    name: ClassVar[str]
    function_name: ClassVar[str]
    signature: ClassVar[str]
    description: ClassVar[str]
    reference_name: ClassVar[str] = ""
    """What ``gap_pct`` is measured against, e.g. "LKH-3 (elkai)" or "L1 lower bound" (shown by
    ``coevo tasks list``; optional)."""
    sense: ClassVar[Literal["min", "max"]] = "min"
    """Which way the objective is better: "min" (lengths, bins) or "max" (values, sizes)."""
    instance_seconds: ClassVar[float] = 10.0
    """Default per-instance limit on the time the candidate's function may take: generous for a
    sound heuristic on the task's largest instances on one slow core, so only runaway candidates
    hit it."""
    lockstep: ClassVar[int] = 64
    """Most instances whose drivers advance together, one message per step carrying all their
    calls (1: one instance at a time, e.g. when one call's answer is a large matrix)."""
    definition_version: ClassVar[str | None] = None
    """What stands for this class's module source in ``definition_hash`` when set on the class
    itself (not inherited): for a package that ships without sources, a version or hash it bumps
    whenever its task changes."""
    definition_files: ClassVar[tuple[str, ...]] = ()
    """Other files the task is defined by (a program task's program and evaluator): their bytes
    are part of ``definition_hash``."""
    provided_names: ClassVar[frozenset[str]] = frozenset()
    """Names the candidate's code may use without defining them, because ``module_source`` puts
    them around it (the fixed part of a program task's program)."""
    child_runs_driver: ClassVar[bool] = False
    """The sandbox may run its own copy of ``drive`` to find all of an instance's answers, and send
    them in one message; the trusted driver then replays them, checking each as it applies it.
    For drivers that do little besides asking (the copy's work is done twice) and whose next
    call follows from the answers alone: it spares a message per step."""

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        """The split's instances, generated deterministically from fixed seeds."""
        raise NotImplementedError

    async def drive(self, heuristic: Heuristic, instance: Instance) -> Any:
        """Build one instance's solution, asking ``await heuristic(...)`` for each decision (trusted)."""
        raise NotImplementedError

    def candidate_code(self, text: str) -> str:
        """The candidate a heuristic file's ``text`` holds (``coevo tasks eval``): the text itself,
        or for a program task the EVOLVE block of a whole program."""
        return text

    def module_source(self, code: str) -> str:
        """The module the sandbox runs for the candidate's ``code``: the code itself, or for a
        program task the program with ``code`` as its evolving block."""
        return code

    def answer_state(self, instance: Instance) -> Any:
        """What ``answer`` keeps for one instance in the sandbox; by default the instance itself."""
        return instance

    def answer(self, function: Callable[..., Any], state: Any, *args: Any) -> Any:
        """Call the candidate's function for one request and return plain data (sandbox side).

        Raise ``InvalidSolution`` with a precise message for a bad return value: the driver
        re-checks whatever arrives, but only this side still sees the value itself.
        """
        return function(*args)

    def construct(self, function: Callable[..., Any], instance: Instance) -> Any:
        """Drive a trusted, in-process function over one instance and return the solution."""
        state = self.answer_state(instance)
        driver = self.drive(HEURISTIC, instance)
        answer = None
        try:
            while True:
                answer = self.answer(function, state, *driver.send(answer).args)
        except StopIteration as finished:
            return finished.value
        finally:
            driver.close()

    def score(self, instance: Instance, solution: Any) -> float:
        """Validate the solution and return its objective (trusted side; raises InvalidSolution)."""
        raise NotImplementedError

    def seed_code(self) -> str:
        """Source of the heuristic the population starts from and every answer is compared with (required)."""
        raise NotImplementedError

    def references(self, split: SplitName, group: InstanceGroup) -> Sequence[float] | None:
        """Reference values the task computes itself for a group (cheap bounds), in the objective's
        natural sign, or None to use the values shipped in ``tasks/data`` where there are any. Gaps are
        shown only where references exist."""
        return None

    def reference_objective(self, instance: Instance) -> float:
        """The instance's reference value (optimum, near-optimum or bound), in the objective's natural sign.

        Slow by nature (LKH, OR-Tools): only ``experiments/compute_references.py`` calls it; everyone
        else reads the shipped values through ``tasks.references``.
        """
        raise NotImplementedError


class ShippedTask(Task):
    """Base of coevo's own tasks, whose seed heuristics ship as ``heuristics/seed/<name>.py``.

    A task of one's own (or a renamed subclass of one of these) defines ``seed_code`` itself: the
    checkout's seed directory is never searched for it."""

    def seed_code(self) -> str:
        path = SEED_DIR / f"{self.name}.py"
        if not path.is_file():
            raise NotImplementedError
        return path.read_text()
