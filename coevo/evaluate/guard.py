"""Run-time defences installed inside the sandboxed child, after the static check has passed.

Two layers: restricted builtins (a guarded ``__import__`` and ``getattr`` family, no ``eval``,
``open``...) catch what slipped past the static check; an audit hook, which cannot be removed
once installed, refuses every audited event (file opens, sockets, subprocesses, ctypes calls,
frame access, compilation of strings...) except the few the candidate legitimately needs.
Any breach is fatal: ``violation`` reports the reason and ends the process, so a candidate
cannot swallow the refusal with ``try/except`` and carry on.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import operator
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from coevo.evaluate.policy import FORBIDDEN_NAMES, attribute_allowed, module_allowed

EXIT_VIOLATION = 86

Violation = Callable[[str], NoReturn]

_CODEGEN_EVENTS = frozenset({"compile", "exec", "sys._getframe", "object.__getattr__"})
"""Events that namedtuple and dataclass raise while they generate (and inspect) their methods."""
_HARMLESS_EVENTS = frozenset({"object.__setattr__", "object.__delattr__", "builtins.id"})
"""``id()``, and setting a class attribute: candidates may do so to their own classes (built-in
types refuse it anyway, and nothing of the evaluator's is reachable to be patched)."""


class _CodegenGate:
    """Lets a vetted stdlib code generator compile while it runs, and nothing else."""

    def __init__(self) -> None:
        self.depth = 0

    @contextlib.contextmanager
    def open(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def wrap(self, generator: Callable[..., Any]) -> Callable[..., Any]:
        def gated(*args: Any, **kwargs: Any) -> Any:
            with self.open():
                result = generator(*args, **kwargs)
            # ``dataclass(frozen=True)`` returns the decorator that does the generating.
            return result if isinstance(result, type) else self.wrap(result)

        return gated


def install_audit_hook(module_code: types.CodeType, gate: _CodegenGate, violation: Violation) -> None:
    """Refuse every audited event except executing the candidate's module code (once)."""
    pending = [module_code]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "exec" and pending and args and args[0] is pending[0]:
            pending.clear()
            return
        if event in _HARMLESS_EVENTS or (gate.depth and event in _CODEGEN_EVENTS):
            return
        violation(f"sandbox refused {event}({_shown(args)})")

    sys.addaudithook(hook)


def _shown(args: tuple[Any, ...]) -> str:
    """The event's first argument, rendered without calling any candidate-defined ``__repr__``."""
    if not args:
        return ""
    first = args[0]
    return repr(first)[:80] if type(first) in (str, bytes, int) else type(first).__name__


def restricted_builtins(violation: Violation, gate: _CodegenGate) -> dict[str, Any]:
    """A builtins dict for candidates; its code generators open ``gate`` while they run."""
    safe = {
        name: value
        for name, value in vars(builtins).items()
        if name not in FORBIDDEN_NAMES and not (name.startswith("__") and name != "__build_class__")
    }
    # Forbidden builtins stay as tripwires rather than gaps: C code such as numpy's
    # ``fromfile`` looks ``open`` up in the caller's builtins and must hit a clear refusal.
    safe.update({name: _tripwire(name, violation) for name in FORBIDDEN_NAMES})
    safe_modules = _safe_module_views(gate, violation)

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level or not module_allowed(name):
            violation(f"import of {name!r} refused at run time")
        if name not in sys.modules:
            violation(f"import of {name!r} refused at run time (not preloaded in the sandbox)")
        for item in fromlist or ():
            if item != "*" and not attribute_allowed(item):
                violation(f"importing {item!r} from {name!r} refused at run time")
        top = name.split(".")[0]
        module = sys.modules[name] if fromlist else sys.modules[top]
        return safe_modules.get(module.__name__, module)

    def checked_name(name: Any) -> Any:
        if isinstance(name, str) and not attribute_allowed(name):
            violation(f"access to attribute {name!r} refused at run time")
        return name

    def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
        value = getattr(obj, checked_name(name), *default)
        if isinstance(value, types.ModuleType) and not module_allowed(value.__name__):
            violation(f"reaching module {value.__name__!r} refused at run time")
        return value

    safe.update(
        __name__="candidate",
        __import__=guarded_import,
        getattr=guarded_getattr,
        hasattr=lambda obj, name: hasattr(obj, checked_name(name)),
        setattr=lambda obj, name, value: setattr(obj, checked_name(name), value),
        delattr=lambda obj, name: delattr(obj, checked_name(name)),
    )
    return safe


def _tripwire(name: str, violation: Violation) -> Callable[..., NoReturn]:
    def refused(*args: Any, **kwargs: Any) -> NoReturn:
        violation(f"{name}() refused at run time")

    return refused


def _safe_module_views(gate: _CodegenGate, violation: Violation) -> dict[str, types.ModuleType]:
    """Copies of modules whose members could bypass the guards, with those members wrapped."""

    def checked_names(names: tuple[Any, ...]) -> tuple[Any, ...]:
        for name in names:
            for part in str(name).split("."):
                if not attribute_allowed(part):
                    violation(f"access to attribute {part!r} refused at run time")
        return names

    replacements = {
        operator: {
            "attrgetter": lambda *names: operator.attrgetter(*checked_names(names)),
            "methodcaller": lambda name, *args, **kwargs: operator.methodcaller(
                *checked_names((name,)), *args, **kwargs
            ),
        },
        collections: {"namedtuple": gate.wrap(collections.namedtuple)},
        dataclasses: {"dataclass": gate.wrap(dataclasses.dataclass)},
    }
    views = {}
    for module, members in replacements.items():
        view = types.ModuleType(module.__name__, module.__doc__)
        vars(view).update(vars(module))
        vars(view).update(members)
        views[module.__name__] = view
    return views


class Guard:
    """The run-time layers, built once in the fork server and armed in each child.

    Building the restricted builtins costs more than a fork, so the fork server does it once;
    a child only says where breaches are reported (``arm``) and installs the audit hook.
    """

    def __init__(self) -> None:
        self._report: Callable[[str], None] | None = None
        self.gate = _CodegenGate()
        self.builtins = restricted_builtins(self.violation, self.gate)

    def violation(self, reason: str) -> NoReturn:
        """Report the breach and end the process: a refusal must not be swallowable."""
        try:
            if self._report is not None:
                self._report(reason)
        finally:
            os._exit(EXIT_VIOLATION)

    def arm(self, module_code: types.CodeType, report: Callable[[str], None]) -> None:
        """Install the audit hook; from now on only ``module_code`` may be executed (once)."""
        self._report = report
        install_audit_hook(module_code, self.gate, self.violation)
