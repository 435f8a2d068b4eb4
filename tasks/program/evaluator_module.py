"""Loading a program task's ``evaluator.py``, once ``evaluator_check`` has passed it.

The evaluator is the user's trusted code: it loads in coevo's processes (the fork server loads it
before it confines itself, so the driver processes inherit it) and runs in a driver process, where
no file can be read or written. What it may do with the program is call its functions, which run
in the sandbox (``stand_in``).

While it loads, ``import openevolve.evaluation_result`` gives coevo's own small module
(``evaluation_result``); the name is served for that moment only, so an installed OpenEvolve is
neither shadowed nor imported.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from coevo.plugins import PluginError, module_from_file
from tasks.program import evaluation_result
from tasks.program.evaluator_check import refusal
from tasks.program.layout import LayoutError
from tasks.program.stand_in import serving

LAZY_IMPORTS = ("concurrent.futures.thread",)
"""Modules evaluators use whose import is deferred to first use (``ThreadPoolExecutor``): imported
while files can still be read, as the driver process that runs ``evaluate`` can read none."""
_SERVED = {"openevolve": None, "openevolve.evaluation_result": evaluation_result}


def check_evaluator(path: Path) -> None:
    """LayoutError (one line) when the evaluator at ``path`` cannot be read or is refused (``refusal``)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LayoutError(f"cannot read {path}: {error}") from None
    refused = refusal(source, path.name)
    if refused is not None:
        raise LayoutError(refused)


def load_evaluate(path: Path, spec: str) -> Callable[[str], Any]:
    """The ``evaluate`` function of the evaluator at ``path`` (once per process), which
    ``check_evaluator`` passed; LayoutError (one line) when it fails to load or has no ``evaluate``."""
    try:
        with _openevolve_served(), serving(None):
            module = module_from_file(str(path), "program task", spec)
    except PluginError as error:
        raise LayoutError(str(error)) from None
    for name in LAZY_IMPORTS:
        importlib.import_module(name)
    evaluate = getattr(module, "evaluate", None)
    if not callable(evaluate):
        raise LayoutError(f"{path.name} defines no evaluate(program_path)")
    return evaluate


class _ServedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``openevolve`` (an empty package) and ``openevolve.evaluation_result`` (coevo's)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _SERVED:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=_SERVED[fullname] is None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: types.ModuleType) -> None:
        source = _SERVED[module.__name__]
        if source is not None:
            module.__dict__.update({name: getattr(source, name) for name in source.__all__})


@contextlib.contextmanager
def _openevolve_served() -> Iterator[None]:
    """``openevolve.evaluation_result`` is coevo's while inside; ``sys.modules`` is put back after."""
    saved = {name: sys.modules.pop(name) for name in _SERVED if name in sys.modules}
    finder = _ServedModules()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in _SERVED:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
