"""The program as the evaluator sees it: a module whose functions are calls into the sandbox.

``evaluate(program_path)`` is handed ``PROGRAM_PATH``, where no file exists. While it runs
(``serving``), loading that path gives the stand-in module instead of executing anything here:
``importlib.util.spec_from_file_location(name, PROGRAM_PATH)`` followed by ``module_from_spec``
and ``exec_module``, or ``importlib.import_module`` / ``__import__`` / ``import`` of the path's
stem. Each of the module's functions sends its arguments (plain data) to the candidate's child and
returns what its function returned there, or raises what it raised; the program's own code never
runs in this process. Any other use of the path (opening it, running it as a process) finds no file.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any, Protocol

PROGRAM_PATH = "/coevo-sandbox/program.py"
"""The path ``evaluate`` is given: it names no file, only the program running in the sandbox."""
PROGRAM_MODULE = "program"
"""The module name ``import``, ``import_module`` and ``__import__`` answer with the stand-in."""

_real_spec_from_file_location = importlib.util.spec_from_file_location
_serving_lock = threading.Lock()
_served: list[Calls | None] = [None]
"""The session whose program ``PROGRAM_PATH`` stands for now (None: no evaluation runs)."""
_active = [0]
"""How many ``serving`` blocks are open (an abandoned evaluation may still be unwinding)."""


class Calls(Protocol):
    """What the stand-in needs of an evaluation session (``session.EvaluationSession``)."""

    functions: frozenset[str]
    """The program's top-level functions, as its child reported them."""

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One call of the program's function ``name`` in the sandbox: its return value, or its exception."""
        ...


class RemoteFunction:
    """One of the program's functions, called in the sandbox."""

    def __init__(self, calls: Calls, name: str) -> None:
        self._calls, self.__name__, self.__qualname__ = calls, name, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._calls.call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self.__name__} of the sandboxed program>"


def _only_functions(name: str) -> Any:
    raise AttributeError(
        f"the program has no function {name!r}: coevo's stand-in of the program offers its top-level functions "
        "only, called in the sandbox (its classes and other objects stay there)"
    )


class _StandInLoader(importlib.abc.Loader):
    """Makes the stand-in module; executing it runs nothing (the program ran in its child)."""

    def __init__(self, calls: Calls) -> None:
        self._calls = calls

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name, "The program, running in coevo's sandbox.")
        for name in sorted(self._calls.functions):
            setattr(module, name, RemoteFunction(self._calls, name))
        module.__getattr__ = _only_functions  # PEP 562: says why anything else is missing
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module's code already ran in the sandbox."""


class _ProgramFinder(importlib.abc.MetaPathFinder):
    """Answers ``import program`` (the stem of ``PROGRAM_PATH``) with the stand-in while serving."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        calls = _served[0]
        if fullname != PROGRAM_MODULE or calls is None:
            return None
        return _program_spec(fullname, calls)


_FINDER = _ProgramFinder()


def _program_spec(name: str, calls: Calls) -> importlib.machinery.ModuleSpec:
    spec = importlib.machinery.ModuleSpec(name, _StandInLoader(calls), origin=PROGRAM_PATH)
    spec.has_location = True
    return spec


def spec_from_file_location(name: str, location: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``importlib.util.spec_from_file_location``, but the stand-in's spec for ``PROGRAM_PATH``."""
    calls = _served[0]
    if calls is not None and location is not None and os.fspath(location) == PROGRAM_PATH:
        return _program_spec(name, calls)
    return _real_spec_from_file_location(name, location, *args, **kwargs)


@contextlib.contextmanager
def serving(calls: Calls | None) -> Iterator[None]:
    """While inside, ``PROGRAM_PATH`` loads as the stand-in for ``calls`` (None: for no one yet, as
    while an evaluator loads: a ``from importlib.util import spec_from_file_location`` it runs
    then binds this module's version). The last to enter is served; an abandoned evaluation still
    unwinding in its thread neither unserves nor leaves its stand-in to the next one. Everything is
    put back when the last one leaves."""
    with _serving_lock:
        if calls is not None:
            _forget_stand_in()
        _served[0] = calls
        if not _active[0]:
            importlib.util.spec_from_file_location = spec_from_file_location
            sys.meta_path.insert(0, _FINDER)
        _active[0] += 1
    try:
        yield
    finally:
        with _serving_lock:
            _active[0] -= 1
            if _served[0] is calls:
                _served[0] = None
                _forget_stand_in()
            if not _active[0]:
                importlib.util.spec_from_file_location = _real_spec_from_file_location
                sys.meta_path.remove(_FINDER)


def _forget_stand_in() -> None:
    """Drop an imported stand-in from ``sys.modules``: each evaluation imports its own."""
    stand_in = sys.modules.get(PROGRAM_MODULE)
    if getattr(stand_in, "__file__", None) == PROGRAM_PATH:
        del sys.modules[PROGRAM_MODULE]
