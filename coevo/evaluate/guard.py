"""Run-time defences installed inside the sandboxed child, after the static check has passed.

Two layers: restricted builtins (a guarded ``__import__``, ``type`` and ``getattr`` family, no
``eval``, ``open``...) catch what slipped past the static check, including names built at run time
(a class from ``type(name, bases, namespace)`` may hold only the special names a class statement
may); an audit hook, which cannot be removed once installed, refuses every audited event (file
opens, sockets, subprocesses, ctypes calls, frame access, compilation of strings...) except the
few the candidate legitimately needs.
Any breach is fatal: ``violation`` reports the reason and ends the process, so a candidate
cannot swallow the refusal with ``try/except`` and carry on.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import functools
import operator
import os
import string
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, NoReturn

import numpy

from coevo.evaluate.policy import (
    FORBIDDEN_NAMES,
    PRELOADED_MODULES,
    REFUSED_HELPERS,
    attribute_allowed,
    class_attribute_allowed,
    module_allowed,
)

EXIT_VIOLATION = 86

Violation = Callable[[str], NoReturn]

_HARMLESS_EVENTS = frozenset({"object.__setattr__", "object.__delattr__", "builtins.id"})
"""``id()``, and setting a class attribute: candidates may do so to their own classes (built-in
types refuse it anyway, and nothing of the evaluator's is reachable to be patched)."""


def install_audit_hook(module_code: types.CodeType, report: Callable[[str], None]) -> None:
    """Refuse every audited event except executing the candidate's module code (once).

    Everything the hook uses is bound in its own closure when it is created: the allowed events,
    the one exec it lets through (identified by the code object), ``os._exit`` itself (not looked
    up in any module at call time) and ``report``. Nothing but the interpreter refers to the hook,
    so no object a candidate holds leads to those cells. Whatever ``report`` does (a candidate
    that reached it may have replaced its code), the process then ends.
    """
    sys.addaudithook(_audit_hook(module_code, report))


def _audit_hook(module_code: types.CodeType, report: Callable[[str], None]) -> Callable[[str, tuple[Any, ...]], None]:
    harmless, pending, end, code = _HARMLESS_EVENTS, [module_code], os._exit, EXIT_VIOLATION
    shown = _argument_shower()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "exec" and pending and args and args[0] is pending[0]:
            pending.clear()
            return
        if event not in harmless:
            try:
                report(f"sandbox refused {event}({shown(args)})")
            finally:
                end(code)

    return _sealed(hook)


def _argument_shower() -> Callable[[tuple[Any, ...]], str]:
    """Renders an event's first argument without calling any candidate-defined ``__repr__``."""
    plain, real_type, real_repr, name_of = (str, bytes, int), type, repr, type.__dict__["__name__"].__get__

    def shown(args: tuple[Any, ...]) -> str:
        if not args:
            return ""
        first = args[0]
        return real_repr(first)[:80] if real_type(first) in plain else name_of(real_type(first))

    return _sealed(shown)


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
    replacements: dict[int, Any] = {}
    """id of a real object -> what a candidate gets instead wherever the guards hand it out."""
    revealed = _revealer(replacements, violation)
    safe_modules = _safe_module_views(checked_names, _namespace_checker(violation), replacements, revealed, violation)
    safe.update(__name__="candidate", **_guarded_lookups(checked_names, safe_modules, revealed, violation))
    safe["type"] = replacements[id(type)]
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
    """Refuses any name that is not exactly a ``str``, and any dotted part that ``attribute_allowed``
    refuses. (A ``str`` subclass could show the check one text and ``getattr`` another.)"""
    allowed, text, real_type, split = attribute_allowed, str, type, str.split
    name_of = type.__dict__["__name__"].__get__

    def checked_names(*names: Any) -> tuple[Any, ...]:
        for name in names:
            if real_type(name) is not text:
                violation(f"an attribute name of type {name_of(real_type(name))!r} refused at run time (only str)")
            for part in split(name, "."):
                if not allowed(part):
                    violation(f"access to attribute {part!r} refused at run time")
        return names

    return _sealed(checked_names)


def _namespace_checker(violation: Violation) -> Callable[[Any], None]:
    """Refuses a class namespace with a key that is not exactly a ``str`` or that
    ``class_attribute_allowed`` refuses (it reads the dict's own storage, as ``type`` does)."""
    allowed, text, real_type, keys = class_attribute_allowed, str, type, dict.keys

    def checked_namespace(namespace: Any) -> None:
        for key in keys(namespace):
            if real_type(key) is not text or not allowed(key):
                violation(f"a class attribute named {key!r} refused at run time" if real_type(key) is text
                          else "a class attribute name that is not a str refused at run time")  # fmt: skip

    return _sealed(checked_namespace)


def _class_factory(metaclass: type, checked_namespace: Callable[[Any], None]) -> Callable[..., Any]:
    """``metaclass`` called only with class namespaces that ``checked_namespace`` accepts."""
    is_dict, dict_type, values = isinstance, dict, dict.values

    def make_class(*args: Any, **kwargs: Any) -> Any:
        for argument in (*args, *values(kwargs)):
            if is_dict(argument, dict_type):
                checked_namespace(argument)
        return metaclass(*args, **kwargs)

    return _sealed(make_class)


def _revealer(replacements: dict[int, Any], violation: Violation) -> Callable[[Any], Any]:
    """What a candidate may hold in place of ``value``: its replacement, or ``value`` itself; a
    metaclass without a replacement is refused (it would build classes nothing has checked)."""
    identity, real_type, is_subclass, name_of = id, type, issubclass, type.__dict__["__name__"].__get__

    def revealed(value: Any) -> Any:
        replacement = replacements.get(identity(value))
        if replacement is not None:
            return replacement
        if is_subclass(real_type(value), real_type) and is_subclass(value, real_type):
            violation(f"reaching the metaclass {name_of(value)!r} refused at run time")
        return value

    return _sealed(revealed)


def _guarded_type(checked_namespace: Callable[[Any], None], revealed: Callable[[Any], Any]) -> Callable[..., Any]:
    """``type(obj)`` through ``revealed``; ``type(name, bases, namespace)`` with a checked namespace."""
    real_type, make_class, length = type, _class_factory(type, checked_namespace), len

    def guarded_type(*args: Any, **kwargs: Any) -> Any:
        if length(args) == 1 and not kwargs:
            return revealed(real_type(args[0]))
        return make_class(*args, **kwargs)

    return _sealed(guarded_type)


def _guarded_lookups(
    checked_names: Callable[..., tuple[Any, ...]],
    safe_modules: dict[str, types.ModuleType],
    revealed: Callable[[Any], Any],
    violation: Violation,
) -> dict[str, Callable[..., Any]]:
    """``__import__`` and the ``getattr`` family, checking every name they are given."""
    modules, module_type, allowed_module, allowed_attribute = sys.modules, types.ModuleType, module_allowed, attribute_allowed
    real_getattr, real_hasattr, real_setattr, real_delattr = getattr, hasattr, setattr, delattr
    is_instance, real_type, text, iterated = isinstance, type, str, tuple

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if real_type(name) is not text or level or not allowed_module(name):
            violation(f"import of {name!r} refused at run time")
        if name not in modules:
            violation(f"import of {name!r} refused at run time (not preloaded in the sandbox)")
        items = iterated(fromlist or ())
        for item in items:
            if real_type(item) is not text or item != "*" and not allowed_attribute(item):
                violation(f"importing {item!r} from {name!r} refused at run time")
        module = modules[name] if items else modules[name.split(".")[0]]
        return safe_modules.get(module.__name__, module)

    def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
        value = revealed(real_getattr(obj, checked_names(name)[0], *default))
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
    checked_names: Callable[..., tuple[Any, ...]],
    checked_namespace: Callable[[Any], None],
    replacements: dict[int, Any],
    revealed: Callable[[Any], Any],
    violation: Violation,
) -> dict[str, types.ModuleType]:
    """Copies of modules whose members could bypass the guards, with those members replaced.

    Fills ``replacements`` with the same substitutes, so that ``type(obj)`` and ``getattr``
    hand out the guarded callable where they would reveal the real one: the classes of
    ``attrgetter`` and ``methodcaller`` objects, ``type`` and every metaclass a module exports.
    """
    attrgetter, methodcaller, partial = operator.attrgetter, operator.methodcaller, functools.partial
    update_wrapper = functools.update_wrapper
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
        # The partial's ``func`` is what a candidate can reach: the guarded update_wrapper.
        return partial(
            sealed_update_wrapper,
            wrapped=wrapped,
            assigned=checked_or_default(assigned, assignments),
            updated=checked_or_default(updated, updates),
        )

    checked_or_default = _sealed(checked_or_default)
    sealed_update_wrapper = _sealed(guarded_update_wrapper)
    replacements.update(
        {
            id(type): _guarded_type(checked_namespace, revealed),
            id(attrgetter): _sealed(guarded_attrgetter),
            id(methodcaller): _sealed(guarded_methodcaller),
            id(types.SimpleNamespace): _namespace_factory(checked_namespace),
            id(numpy.ndarray): _guarded_ndarray(_objects_over_buffers_refused(violation)),
        }
    )
    members: dict[types.ModuleType, dict[str, Any]] = {
        operator: {"attrgetter": replacements[id(attrgetter)], "methodcaller": replacements[id(methodcaller)]},
        functools: {"update_wrapper": sealed_update_wrapper, "wraps": _sealed(guarded_wraps)},
        typing: {name: _revealing(getattr(typing, name), revealed) for name in ("get_origin", "get_args")},
        numpy: {"ndarray": replacements[id(numpy.ndarray)]},
    }
    for module, names in _REFUSED_MEMBERS.items():
        members.setdefault(module, {}).update(
            {name: _tripwire(f"{module.__name__}.{name} {REFUSED_HELPERS[name]}", violation) for name in names}
        )
    for module in filter(None, map(sys.modules.get, PRELOADED_MODULES)):
        for name, value in vars(module).items():
            if attribute_allowed(name) and isinstance(value, type) and issubclass(value, type):
                factory = replacements.setdefault(id(value), _class_factory(value, checked_namespace))
                members.setdefault(module, {}).setdefault(name, factory)
    views = {}
    for module, replaced in members.items():
        view = types.ModuleType(module.__name__, module.__doc__)
        vars(view).update(vars(module))
        vars(view).update(replaced)
        views[module.__name__] = view
    return views


def _namespace_factory(checked_namespace: Callable[[Any], None]) -> Callable[..., Any]:
    """``types.SimpleNamespace`` (reached as the type of what ``time.get_clock_info`` returns),
    holding only the attribute names a class may: its keywords become the instance's attributes,
    where numpy would find ``__array_interface__``."""
    namespace_type, to_dict = types.SimpleNamespace, dict

    def make_namespace(*args: Any, **kwargs: Any) -> Any:
        attributes = to_dict(*args, **kwargs)  # read once: what is checked is what is stored
        checked_namespace(attributes)
        return namespace_type(**attributes)

    return _sealed(make_namespace)


def _objects_over_buffers_refused(violation: Violation) -> Callable[[Any], Any]:
    """Returns an array unless it holds objects in memory it was given (``buffer=``, ``buf=``):
    those are object pointers read from bytes the candidate wrote, so any address would become an
    object. The array is checked once built (its real dtype and base, through ndarray's own
    descriptors), so no argument can show the check one dtype and numpy another."""
    ndarray = numpy.ndarray
    dtype_of, base_of = vars(ndarray)["dtype"].__get__, vars(ndarray)["base"].__get__
    has_object = vars(numpy.dtype)["hasobject"].__get__

    def checked(array: Any) -> Any:
        if has_object(dtype_of(array)) and base_of(array) is not None:
            violation("an array of objects over a raw buffer refused at run time")
        return array

    return _sealed(checked)


def _guarded_ndarray(checked: Callable[[Any], Any]) -> type:
    """What a candidate gets for ``numpy.ndarray`` (and ``type(array)``): a subclass whose
    construction goes through ``checked``, and for which every real array is an instance
    (``isinstance``, ``issubclass`` and ``is`` against ``type(array)`` behave as before)."""
    real, type_call = numpy.ndarray, type.__call__
    instance_check, subclass_check = type.__instancecheck__, type.__subclasscheck__
    guarded: list[type] = []

    def construct(cls: type, *args: Any, **kwargs: Any) -> Any:
        return checked(type_call(real if cls is guarded[0] else cls, *args, **kwargs))

    def is_instance(cls: type, obj: Any) -> bool:
        return instance_check(real if cls is guarded[0] else cls, obj)

    def is_subclass(cls: type, other: Any) -> bool:
        return subclass_check(real if cls is guarded[0] else cls, other)

    methods = {"__call__": construct, "__instancecheck__": is_instance, "__subclasscheck__": is_subclass}
    metaclass = type("ndarray_type", (type,), {name: _sealed(method) for name, method in methods.items()})
    guarded.append(metaclass("ndarray", (real,), {"__module__": real.__module__, "__doc__": real.__doc__}))
    return guarded[0]


def _cached_property_getter(violation: Violation) -> Callable[..., Any]:
    """``functools.cached_property.__get__`` that stores a value only under a name a class may
    hold. ``attrname`` is public and may be renamed at any time (``__array_interface__`` would
    give numpy a raw address), so it is read once, checked, and that name alone is used."""
    allowed, text, real_type, missing, get = class_attribute_allowed, str, type, object(), dict.get

    def cached_get(self: Any, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        name = self.attrname
        if real_type(name) is not text or not allowed(name):
            violation(f"a cached_property named {name!r} refused at run time" if real_type(name) is text
                      else "a cached_property name that is not a str refused at run time")  # fmt: skip
        cache = instance.__dict__
        value = get(cache, name, missing)
        if value is missing:
            value = cache[name] = self.func(instance)
        return value

    return _sealed(cached_get)


def _revealing(function: Callable[..., Any], revealed: Callable[[Any], Any]) -> Callable[..., Any]:
    """``function`` whose result (or each item of a tuple result) passes through ``revealed``."""
    real_type, sequence = type, tuple

    def revealing(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        return sequence([revealed(item) for item in result]) if real_type(result) is sequence else revealed(result)

    return _sealed(revealing)


def _enum_creation_checker(checked_namespace: Callable[[Any], None], violation: Violation) -> Callable[..., Any]:
    """``EnumType._create_`` (the functional API, ``Enum("Name", names)``), taking the member
    names only as plain data, and each as ``checked_namespace`` would take a class attribute."""
    create, real_type, text, pair_kinds = enum.EnumType._create_, type, str, (tuple, list)
    items_of, listed, to_dict, is_instance, every, length = dict.items, list, dict, isinstance, all, len

    def checked_create(cls: Any, class_name: Any, names: Any, **kwargs: Any) -> Any:
        kind = real_type(names)
        if kind is text or names is None:
            plain = names
        elif kind in pair_kinds and every(real_type(name) is text for name in names):
            plain = listed(names)
        elif kind in pair_kinds or is_instance(names, to_dict):
            items = listed(items_of(names)) if is_instance(names, to_dict) else listed(names)
            if not every(real_type(item) in pair_kinds and length(item) == 2 for item in items):
                violation("the functional Enum API takes names as str, a list of names or of (name, value) pairs")
            plain = [(item[0], item[1]) for item in items]
        else:
            violation("the functional Enum API takes names as str, a list of names or of (name, value) pairs")
        listing = plain.replace(",", " ").split() if kind is text else plain or ()
        checked_namespace(to_dict.fromkeys(name if real_type(name) is text else name[0] for name in listing))
        if kwargs.get("module") is None:  # else enum looks it up in the caller's frame, which is refused
            kwargs["module"] = "candidate"
        return create(cls, class_name, plain, **kwargs)

    return _sealed(checked_create)


class Guard:
    """The run-time layers, built once in the fork server and armed in each child.

    Building the restricted builtins costs more than a fork, so the fork server does it once;
    a child only says where breaches are reported (``arm``) and installs the audit hook.
    Nothing a candidate can reach leads to this object: the builtins hold a sealed ``violation``
    whose own cells say where to report.
    """

    def __init__(self) -> None:
        self._report: list[Callable[[str], None]] = []
        violation = _violation(self._report)
        self.builtins = restricted_builtins(violation)
        recarray_new, checked = numpy.recarray.__new__, _objects_over_buffers_refused(violation)
        checked_recarray = _sealed(lambda *args, **kwargs: checked(recarray_new(*args, **kwargs)))
        self._patches: tuple[tuple[type, str, Any], ...] = (
            (enum.EnumType, "_create_", _enum_creation_checker(_namespace_checker(violation), violation)),
            (functools.cached_property, "__get__", _cached_property_getter(violation)),
            (numpy.recarray, "__new__", staticmethod(checked_recarray)),
        )
        """Methods of classes a candidate reaches, replaced before candidate code runs (``patch_classes``)."""
        self._originals = tuple((owner, name, vars(owner)[name]) for owner, name, _ in self._patches)
        self._patched = False

    def arm(self, module_code: types.CodeType, report: Callable[[str], None]) -> None:
        """Install the audit hook; from now on only ``module_code`` may be executed (once)."""
        self._report.append(report)
        self.patch_classes()  # this process runs candidate code from now on (the fork server's children: done)
        install_audit_hook(module_code, report)

    def patch_classes(self) -> None:
        """Put the checked methods of ``_patches`` in place, once per process.

        The fork server does it before it forks any child, so a child inherits them: changing a
        class invalidates the interpreter's method cache for it, which each child would otherwise
        refill, writing (and so copying) some thirty pages of the fork server's memory per candidate.
        """
        if not self._patched:
            for owner, name, replacement in self._patches:
                setattr(owner, name, replacement)
            self._patched = True

    def restore_classes(self) -> None:
        """Put the real methods back: the trusted driver processes, forked by the fork server after
        ``patch_classes``, run the task's own code with them."""
        if self._patched:
            for owner, name, original in self._originals:
                setattr(owner, name, original)
            self._patched = False


def _violation(report_to: list[Callable[[str], None]]) -> Violation:
    """Report the breach and end the process: a refusal must not be swallowable."""
    end, code = os._exit, EXIT_VIOLATION

    def violation(reason: str) -> NoReturn:
        try:
            for report in report_to:
                report(reason)
        finally:
            end(code)

    return _sealed(violation)
