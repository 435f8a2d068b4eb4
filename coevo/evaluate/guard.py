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
import dataclasses
import functools
import operator
import os
import string
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, NoReturn

from coevo.evaluate.policy import FORBIDDEN_NAMES, REFUSED_HELPERS, attribute_allowed, module_allowed

EXIT_VIOLATION = 86

Violation = Callable[[str], NoReturn]

_HARMLESS_EVENTS = frozenset({"object.__setattr__", "object.__delattr__", "builtins.id"})
"""``id()``, and setting a class attribute: candidates may do so to their own classes (built-in
types refuse it anyway, and nothing of the evaluator's is reachable to be patched)."""


def install_audit_hook(module_code: types.CodeType, violation: Violation) -> None:
    """Refuse every audited event except executing the candidate's module code (once).

    The hook keeps its state in its closure, not in anything a candidate can name: the allowed
    events are a frozenset, and the one exec it lets through is identified by the code object.
    """
    harmless, pending = _HARMLESS_EVENTS, [module_code]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "exec" and pending and args and args[0] is pending[0]:
            pending.clear()
            return
        if event not in harmless:
            violation(f"sandbox refused {event}({_shown(args)})")

    sys.addaudithook(hook)


def _shown(args: tuple[Any, ...]) -> str:
    """The event's first argument, rendered without calling any candidate-defined ``__repr__``."""
    if not args:
        return ""
    first = args[0]
    return repr(first)[:80] if type(first) in (str, bytes, int) else type(first).__name__


def restricted_builtins(violation: Violation) -> dict[str, Any]:
    """A builtins dict for candidates: guarded lookups by name, tripwires for the forbidden ones.

    Every callable handed to a candidate is built by ``_sealed``, so its ``__globals__`` hold
    nothing (and its state lives in cells): no route from it leads back into this module.
    """
    safe = {
        name: value
        for name, value in vars(builtins).items()
        if name not in FORBIDDEN_NAMES and not (name.startswith("__") and name != "__build_class__")
    }
    # Forbidden builtins stay as tripwires rather than gaps: C code such as numpy's
    # ``fromfile`` looks ``open`` up in the caller's builtins and must hit a clear refusal.
    safe.update({name: _tripwire(f"{name}() refused at run time", violation) for name in FORBIDDEN_NAMES})
    checked_names = _name_checker(violation)
    safe_modules = _safe_module_views(checked_names, violation)
    safe.update(__name__="candidate", **_guarded_lookups(checked_names, safe_modules, violation))
    return safe


def _sealed(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with empty globals: it may use only its arguments and its closure.

    A candidate that reached a guard's ``__globals__`` would otherwise hold this module's
    namespace, and through it ``os`` and ``sys``. (Its builtins are empty too: a guard that
    looked a builtin up by name would fail at once, in the tests, not leak one.)
    """
    sealed = types.FunctionType(function.__code__, {"__builtins__": {}}, function.__name__, function.__defaults__, function.__closure__)
    sealed.__kwdefaults__ = function.__kwdefaults__
    return sealed


def _name_checker(violation: Violation) -> Callable[..., tuple[Any, ...]]:
    """Refuses any dotted part of any name that ``attribute_allowed`` refuses."""
    allowed, text = attribute_allowed, str

    def checked_names(*names: Any) -> tuple[Any, ...]:
        for name in names:
            for part in text(name).split("."):
                if not allowed(part):
                    violation(f"access to attribute {part!r} refused at run time")
        return names

    return _sealed(checked_names)


def _guarded_lookups(
    checked_names: Callable[..., tuple[Any, ...]], safe_modules: dict[str, types.ModuleType], violation: Violation
) -> dict[str, Callable[..., Any]]:
    """``__import__`` and the ``getattr`` family, checking every name they are given."""
    modules, module_type, allowed_module, allowed_attribute = sys.modules, types.ModuleType, module_allowed, attribute_allowed
    real_getattr, real_hasattr, real_setattr, real_delattr = getattr, hasattr, setattr, delattr
    is_instance = isinstance

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level or not allowed_module(name):
            violation(f"import of {name!r} refused at run time")
        if name not in modules:
            violation(f"import of {name!r} refused at run time (not preloaded in the sandbox)")
        for item in fromlist or ():
            if item != "*" and not allowed_attribute(item):
                violation(f"importing {item!r} from {name!r} refused at run time")
        module = modules[name] if fromlist else modules[name.split(".")[0]]
        return safe_modules.get(module.__name__, module)

    def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
        value = real_getattr(obj, checked_names(name)[0], *default)
        if is_instance(value, module_type) and not allowed_module(value.__name__):
            violation(f"reaching module {value.__name__!r} refused at run time")
        return value

    def guarded_hasattr(obj: Any, name: str) -> bool:
        return real_hasattr(obj, checked_names(name)[0])

    def guarded_setattr(obj: Any, name: str, value: Any) -> None:
        real_setattr(obj, checked_names(name)[0], value)

    def guarded_delattr(obj: Any, name: str) -> None:
        real_delattr(obj, checked_names(name)[0])

    lookups = (guarded_import, guarded_getattr, guarded_hasattr, guarded_setattr, guarded_delattr)
    names = ("__import__", "getattr", "hasattr", "setattr", "delattr")
    return {name: _sealed(function) for name, function in zip(names, lookups)}


def _tripwire(reason: str, violation: Violation) -> Callable[..., NoReturn]:
    def refused(*args: Any, **kwargs: Any) -> NoReturn:
        violation(reason)

    return _sealed(refused)


_REFUSED_MEMBERS = {
    collections: ("namedtuple",),
    dataclasses: ("dataclass", "make_dataclass"),
    typing: ("NamedTuple",),
    string: ("Formatter",),
}
"""Where the helpers of ``REFUSED_HELPERS`` live (code generation is refused by the audit hook
in any case; these tripwires give the reason)."""


def _safe_module_views(
    checked_names: Callable[..., tuple[Any, ...]], violation: Violation
) -> dict[str, types.ModuleType]:
    """Copies of modules whose members could bypass the guards, with those members replaced."""
    attrgetter, methodcaller = operator.attrgetter, operator.methodcaller
    update_wrapper, wraps = functools.update_wrapper, functools.wraps
    assignments, updates = functools.WRAPPER_ASSIGNMENTS, functools.WRAPPER_UPDATES

    def checked_or_default(names: Any, default: tuple[str, ...]) -> tuple[Any, ...]:
        return default if names is default else checked_names(*names)

    def guarded_attrgetter(*names: Any) -> Any:
        return attrgetter(*checked_names(*names))

    def guarded_methodcaller(name: Any, *args: Any, **kwargs: Any) -> Any:
        return methodcaller(*checked_names(name), *args, **kwargs)

    def guarded_update_wrapper(wrapper: Any, wrapped: Any, assigned: Any = assignments, updated: Any = updates) -> Any:
        return update_wrapper(
            wrapper, wrapped, checked_or_default(assigned, assignments), checked_or_default(updated, updates)
        )

    def guarded_wraps(wrapped: Any, assigned: Any = assignments, updated: Any = updates) -> Any:
        return wraps(wrapped, checked_or_default(assigned, assignments), checked_or_default(updated, updates))

    checked_or_default = _sealed(checked_or_default)
    replacements: dict[types.ModuleType, dict[str, Any]] = {
        operator: {"attrgetter": _sealed(guarded_attrgetter), "methodcaller": _sealed(guarded_methodcaller)},
        functools: {"update_wrapper": _sealed(guarded_update_wrapper), "wraps": _sealed(guarded_wraps)},
    }
    for module, names in _REFUSED_MEMBERS.items():
        replacements.setdefault(module, {}).update(
            {name: _tripwire(f"{module.__name__}.{name} {REFUSED_HELPERS[name]}", violation) for name in names}
        )
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
        self.builtins = restricted_builtins(self.violation)

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
        install_audit_hook(module_code, self.violation)
