"""A problem in OpenEvolve's layout as a coevo task: a folder with ``initial_program.py`` and ``evaluator.py``.

The candidate is the program's EVOLVE block (``tasks.program.layout``); the text around it is the
task's and is kept as it is. The sandboxed child runs the whole program. The evaluator's
``evaluate(program_path)`` runs in the trusted driver process (``drive``) against a stand-in of the
program whose functions are calls into the child (``tasks.program.stand_in``), their arguments and
return values crossing the channel as plain data. What ``evaluate`` returns (a dict of metrics, or
an ``EvaluationResult``) is the solution; ``combined_score`` is the objective, higher is better
(without one, the mean of the numeric metrics, as OpenEvolve takes it).

A folder is named by its path (``coevo tasks eval path/to/problem ...``); a subclass that sets
``folder`` (relative to its own file) may change the class attributes, e.g. ``instance_seconds``.
"""

from __future__ import annotations

import functools
import math
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from coevo.plugins import remember_spec
from tasks import UnknownTaskError
from tasks.base import Heuristic, Instance, InstanceGroup, InvalidSolution, SplitName, Task
from tasks.program.evaluator_module import check_evaluator, load_evaluate
from tasks.program.layout import Folder, LayoutError, defined_names, evolved_block, signature_of, target_function
from tasks.program.session import EvaluationSession, Finished, Request, outcome_of

_INSTANCE: Instance = {}
"""The one instance: an evaluation is the evaluator's whole run."""


class ProgramTask(Task):
    """Base of the program tasks; a subclass names its ``folder`` and the rest is read from there."""

    folder: ClassVar[str]
    """The program folder, absolute or relative to the file that defines the subclass."""
    layout: ClassVar[Folder]
    sense = "max"
    lockstep = 1
    instance_seconds = 60.0
    """Default seconds of the program's own time per evaluation; ``config.yaml``'s
    ``evaluator.timeout`` where the folder has one."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Read the folder once per class: the block, the function the LLM writes, the prompt's text."""
        super().__init_subclass__(**kwargs)
        if "folder" not in vars(cls):
            return
        layout = Folder.read(_resolved(cls))
        check_evaluator(layout.evaluator)
        function = target_function(layout.program, str(layout.path / "initial_program.py"))
        declared = vars(cls)
        cls.layout = layout
        cls.function_name = function.name
        cls.signature = signature_of(function)
        cls.provided_names = defined_names(layout.program.head + layout.program.tail)
        cls.definition_files = tuple(str(path) for path in layout.files)
        if "name" not in declared:
            cls.name = layout.path.name
        if "description" not in declared:
            cls.description = _description(layout, function.name)
        if "instance_seconds" not in declared and layout.timeout is not None:
            cls.instance_seconds = float(layout.timeout)

    def __init__(self) -> None:
        try:
            self._evaluate = load_evaluate(self.layout.evaluator, str(self.layout.path))
        except LayoutError as error:
            raise UnknownTaskError(f"task {str(self.layout.path)!r}: {error}") from None

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return [InstanceGroup("program", [_INSTANCE])]

    def seed_code(self) -> str:
        return self.layout.program.block

    def candidate_code(self, text: str) -> str:
        return evolved_block(text)

    def module_source(self, code: str) -> str:
        return self.layout.program.with_block(code)

    async def drive(self, heuristic: Heuristic, instance: Instance) -> dict[str, float | str]:
        """Run ``evaluate`` against the program, answering each of its calls from the sandbox."""
        functions = await heuristic("functions")
        if type(functions) is not list or not all(type(name) is str for name in functions):
            raise InvalidSolution("the sandbox did not list the program's functions")
        public = frozenset(name for name in functions if name.isidentifier() and not name.startswith("__"))
        session = EvaluationSession(self._evaluate, public)
        try:
            event = session.next_event()
            while isinstance(event, Request):
                event.answer(outcome_of(await heuristic("call", event.name, event.args, event.kwargs)))
                event = session.next_event()
        finally:
            session.abandon()
        return _metrics(event)

    def answer(self, function: Callable[..., Any], state: Any, request: str, *details: Any) -> Any:
        """Sandbox side: list the program's functions, or call one and say what it returned or raised."""
        program = function.__globals__  # the program's module namespace
        if request == "functions":
            return sorted(name for name, value in program.items() if isinstance(value, types.FunctionType))
        name, args, kwargs = details
        target = program.get(name)
        if not isinstance(target, types.FunctionType):
            return ["raised", "AttributeError", f"the program has no function {name!r}"]
        try:
            return ["returned", target(*args, **kwargs)]
        except Exception as error:  # noqa: BLE001 - the evaluator decides what the program's error means
            return ["raised", type(error).__name__, str(error)[:300]]

    def score(self, instance: Instance, solution: Any) -> float:
        """``combined_score``, or the mean of the numeric metrics where there is none."""
        if type(solution) is not dict:
            raise InvalidSolution("the evaluation returned no metrics")
        numbers = {key: value for key, value in solution.items() if type(value) in (int, float)}
        if "combined_score" in numbers:
            return float(numbers["combined_score"])
        if not numbers:
            raise InvalidSolution(f"evaluate returned no numeric metric (got {sorted(solution)[:5]})")
        return math.fsum(numbers.values()) / len(numbers)


@functools.cache
def program_task_class(folder: Path) -> type[ProgramTask]:
    """The task class of the program folder at the absolute path ``folder`` (one per process);
    LayoutError (one line) when the folder is not a program task."""
    body = {"folder": str(folder), "__module__": __name__}
    cls = types.new_class(f"Program_{folder.name}", (ProgramTask,), exec_body=lambda namespace: namespace.update(body))
    remember_spec(cls, str(folder))
    return cls


def _resolved(cls: type[ProgramTask]) -> Path:
    folder = Path(cls.folder).expanduser()
    if not folder.is_absolute():
        defined_in = getattr(sys.modules.get(cls.__module__), "__file__", None)
        folder = (Path(defined_in).parent if defined_in else Path.cwd()) / folder
    return folder.resolve()


def _description(layout: Folder, function_name: str) -> str:
    """The problem as prompts show it: the config's system message, then the fixed program."""
    problem = layout.system_message or f"Improve the program in {layout.path.name}/initial_program.py."
    return (
        f"{problem}\n\nOnly the code between the EVOLVE-BLOCK markers changes: write {function_name} "
        "(with any helpers it uses); the rest of the program stays as it is and may be called:\n"
        f"```python\n{layout.program.fixed_text.strip()}\n```\n"
        "The program's score is the evaluator's combined_score (higher is better)."
    )


def _metrics(finished: Finished) -> dict[str, float | str]:
    """What ``evaluate`` returned, as metrics that can cross to the parent; InvalidSolution when it
    raised or returned something else than metrics."""
    if finished.error is not None:
        error = finished.error
        raise InvalidSolution(f"evaluate raised {type(error).__name__}: {str(error)[:300]}")
    result = finished.result
    metrics = getattr(result, "metrics", result)
    if not isinstance(metrics, dict):
        raise InvalidSolution(
            f"evaluate returned a {type(result).__name__}, not a dict of metrics or an EvaluationResult"
        )
    kept: dict[str, float | str] = {}
    for key, value in metrics.items():
        if isinstance(value, str):
            kept[str(key)] = value[:300]
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            kept[str(key)] = float(value)
    return kept
