"""One evaluation: the evaluator's ``evaluate`` in a thread of the trusted driver process, its calls
into the program handed to the task's driver one at a time.

``evaluate`` is ordinary blocking code, while the driver asks the sandbox with ``await``. So
``evaluate`` runs in a thread of its own; each call of a stand-in function (``stand_in``), from that
thread or any thread it starts, becomes a ``Request`` that the driver takes with ``next_event``,
answers from the sandbox, and hands back with ``Request.answer``. When the candidate's run ends
before ``evaluate`` does (a time limit, a broken answer), ``abandon`` makes every pending and later
call raise ``Abandoned``, a ``BaseException`` that ``except Exception`` in an evaluator lets through.
"""

from __future__ import annotations

import builtins
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tasks.base import InvalidSolution
from tasks.plain_data import encode_solution
from tasks.program.stand_in import PROGRAM_PATH, serving


class Abandoned(BaseException):
    """The candidate's verdict is in: the evaluator's call into the program is not answered."""


_ABANDONED = object()


@dataclass(eq=False)
class Request:
    """One call of the program's function ``name``, awaiting its outcome."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    _outcome: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue, repr=False)

    def answer(self, outcome: Any) -> None:
        """Hand the call its outcome: the value it returns, or the exception it raises."""
        self._outcome.put(outcome)


@dataclass(frozen=True)
class Finished:
    """``evaluate`` returned ``result``, or raised ``error``."""

    result: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class Returned:
    """A call's value, as it came back from the sandbox."""

    value: Any


class EvaluationSession:
    """``evaluate(PROGRAM_PATH)`` running against the program whose top-level functions are ``functions``."""

    def __init__(self, evaluate: Callable[[str], Any], functions: frozenset[str]) -> None:
        self.functions = functions
        self._events: queue.SimpleQueue[Request | Finished] = queue.SimpleQueue()
        self._unanswered: list[Request] = []
        self._lock = threading.Lock()
        self._abandoned = False
        threading.Thread(target=self._run, args=(evaluate,), name="coevo-evaluator", daemon=True).start()

    def next_event(self) -> Request | Finished:
        """The next call into the program, or how ``evaluate`` ended (waits for either)."""
        return self._events.get()

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A stand-in function's call (evaluator side): the program's value, or its exception."""
        try:
            encode_solution((args, kwargs))
        except InvalidSolution as refused:
            raise TypeError(f"{name}() was given something that is not plain data ({refused})") from None
        request = Request(name, args, kwargs)
        with self._lock:
            if self._abandoned:
                raise Abandoned
            self._unanswered.append(request)
            self._events.put(request)
        outcome = request._outcome.get()
        with self._lock:
            if request in self._unanswered:
                self._unanswered.remove(request)
        if outcome is _ABANDONED:
            raise Abandoned
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome.value

    def abandon(self) -> None:
        """Unwind every call still waiting, and refuse those to come."""
        with self._lock:
            self._abandoned = True
            for request in self._unanswered:
                request.answer(_ABANDONED)
            self._unanswered.clear()

    def _run(self, evaluate: Callable[[str], Any]) -> None:
        try:
            with serving(self):
                result = evaluate(PROGRAM_PATH)
        except Abandoned:
            if not self._abandoned:  # a stand-in kept from an earlier, abandoned evaluation was called
                self._events.put(Finished(error=RuntimeError("evaluate called the program of an earlier evaluation")))
            return
        except BaseException as error:  # noqa: BLE001 - the driver reports how evaluate ended
            self._events.put(Finished(error=error))
            return
        self._events.put(Finished(result=result))


def outcome_of(answer: Any) -> Returned | Exception:
    """What a call's answer from the sandbox means: ``["returned", value]`` or ``["raised", type
    name, message]``; anything else is the candidate's doing (InvalidSolution)."""
    if type(answer) is list and len(answer) == 2 and answer[0] == "returned":
        return Returned(answer[1])
    if type(answer) is list and len(answer) == 3 and answer[0] == "raised" and all(type(a) is str for a in answer[1:]):
        return program_exception(answer[1][:100], answer[2][:300])
    raise InvalidSolution("the sandbox answered a call with neither a value nor an exception")


def program_exception(type_name: str, message: str) -> Exception:
    """The exception the program raised, as the evaluator would have caught it: a built-in exception
    type of that name where there is one, else a RuntimeError naming the type."""
    kind = getattr(builtins, type_name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except TypeError:  # a built-in that takes other arguments (UnicodeDecodeError)
            pass
    return RuntimeError(f"{type_name}: {message}")
