"""Naming a plugin the way the Python ecosystem does: a file, a module, or an entry point.

A spec is one of
  * ``path/to/problem.py:ClassName``: a class in a file (the path relative to the current directory);
  * ``package.module:ClassName``: a class in an importable module;
  * ``name``: a name registered under an entry-point group (``coevo.tasks``, ``coevo.envs``), which is
    how coevo registers its own tasks and environments too, so built-ins are not special;
  * ``path/to/folder``: a folder a group knows how to read (a program task in OpenEvolve's layout),
    named with a path separator so that it never reads as a registered name.

Every failure is a `PluginError` whose message is one line naming the spec and what is wrong, for the
CLI to print as it is.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

_FILE_MODULES: dict[str, str] = {}
"""Module name -> absolute path of every plugin file imported in this process."""
_MADE_CLASSES: dict[type, str] = {}
"""Classes built at run time from a spec (a program folder) -> the spec that builds them again."""


class PluginError(ValueError):
    """A plugin that cannot be found or loaded; the message is one line for the user."""


def is_spec(name: str) -> bool:
    """Whether `name` names a file or module (``...:Class``) rather than a registered name."""
    return ":" in name


def names_folder(name: str) -> bool:
    """Whether `name` is a path to a folder (it has a path separator and no ``:Class``)."""
    return not is_spec(name) and _is_path(name) and not name.endswith(".py")


@cache
def registered(group: str) -> dict[str, str]:
    """name -> ``module:Class`` for every entry point in `group`, in the order the packages list them.

    Read once per process: scanning every installed distribution's metadata is the costly part, and
    what is installed does not change under a running process. Callers must not mutate the result.
    (``importlib.metadata`` is imported here, not at the top: the sandbox's fork server imports this
    module to load a task by its spec, and every module it imports is in every candidate's process.)"""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=group)}


def normalised(name: str, base: Path | None = None) -> str:
    """`name` with a file path made absolute (a relative one taken from `base`, default the current
    directory), so the spec means the same from any directory (a Ray worker, a resumed run);
    registered names and module specs come back unchanged."""
    if names_folder(name):
        return str(((base or Path.cwd()) / Path(name).expanduser()).resolve())
    if not is_spec(name):
        return name
    where, _, attribute = name.rpartition(":")
    if not _is_path(where):
        return name
    path = Path(where).expanduser()
    return f"{((base or Path.cwd()) / path).resolve()}:{attribute}"


def load(group: str, name: str, kind: str) -> type:
    """The class that `name` (a name registered in `group`, or a spec) names; `kind` words the errors.
    Plugin kinds look classes up through their `Registry`, which refuses unknown names first."""
    if not is_spec(name):
        known = registered(group)
        if name not in known:
            raise PluginError(f"unknown {kind} {name!r}")
        name = known[name]
    where, _, attribute = name.rpartition(":")
    if not where or not attribute:
        raise PluginError(f"{kind} {name!r}: expected path/to/file.py:Class or package.module:Class")
    module = module_from_file(where, kind, name) if _is_path(where) else _module(where, kind, name)
    found = getattr(module, attribute, None)
    if not isinstance(found, type):
        what = "is not a class" if found is not None else "is not defined there"
        raise PluginError(f"{kind} {name!r}: {attribute} {what}")
    return found


@dataclass(frozen=True)
class Registry:
    """One kind of plugin (methods, backends, workloads, executors, ES strategies, embedders, tasks,
    environments): the names registered under its entry-point group, names it knows without
    registration (`built_in`: name -> ``module:Class``), and file or module specs. Every kind looks its
    classes up, checks them and words its errors the same way, and `coevo plugins` lists them all.

    `requires` says what a class lacks to be of this kind (None: nothing), in words for the error."""

    group: str
    kind: str
    requires: Callable[[type], str | None] = lambda cls: None
    built_in: Mapping[str, str] = field(default_factory=dict)

    def names(self) -> tuple[str, ...]:
        """Every name a config may use without a spec."""
        return (*self.built_in, *(name for name in registered(self.group) if name not in self.built_in))

    def get(self, name: str) -> type:
        """The class `name` names; PluginError (one line) when it is unknown, cannot load, or lacks what
        the kind requires."""
        if not is_spec(name) and name not in self.built_in and name not in registered(self.group):
            kinds = f"{self.kind[:-1]}ies" if self.kind.endswith("y") else f"{self.kind}s"
            raise PluginError(
                f"unknown {self.kind} {name!r}; known {kinds}: {', '.join(self.names()) or 'none'} (or name one as"
                " path/to/file.py:Class or package.module:Class)"
            )
        cls = load(self.group, self.built_in.get(name, name), self.kind)
        if (missing := self.requires(cls)) is not None:
            raise PluginError(f"{self.kind} {name!r}: {cls.__qualname__} is not a {self.kind} ({missing})")
        return cls

    def sources(self) -> dict[str, tuple[str, str]]:
        """name -> (``module:Class``, the package that registers it, or "built in")."""
        from importlib.metadata import entry_points  # not at the top: see `registered`

        found = {name: (spec, "built in") for name, spec in self.built_in.items()}
        for entry in entry_points(group=self.group):
            found.setdefault(entry.name, (entry.value, entry.dist.name if entry.dist is not None else "unknown"))
        return found


def remember_spec(cls: type, spec: str) -> None:
    """Record that `spec` (a folder) builds `cls`, a class made at run time, for `spec_of`."""
    _MADE_CLASSES[cls] = spec


def spec_of(cls: type) -> str:
    """The spec that loads `cls` again in another process: the folder of a class made from one,
    ``file.py:Class`` for a class loaded from a file, ``module:Class`` otherwise."""
    if cls in _MADE_CLASSES:
        return _MADE_CLASSES[cls]
    module = sys.modules[cls.__module__]
    origin = _FILE_MODULES.get(module.__name__)
    return f"{origin if origin is not None else module.__name__}:{cls.__qualname__}"


def _is_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def _module(module_name: str, kind: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PluginError(f"{kind} {spec!r}: module {exc.name!r} not found") from None
    except Exception as exc:
        raise PluginError(f"{kind} {spec!r}: importing {module_name} raised {one_line(exc)}") from None


def module_from_file(path_text: str, kind: str, spec: str) -> ModuleType:
    """Import a file once per process under a name derived from its absolute path, so two files with
    the same stem never collide and objects defined there pickle by reference within the process."""
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise PluginError(f"{kind} {spec!r}: file {path_text} not found")
    module_name = f"coevo_plugin_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise PluginError(f"{kind} {spec!r}: {path_text} is not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    _FILE_MODULES[module_name] = str(path)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name], _FILE_MODULES[module_name]
        raise PluginError(f"{kind} {spec!r}: importing {path_text} raised {one_line(exc)}") from None
    return module


def one_line(exc: BaseException) -> str:
    """An exception as `Type: message`, cut to its first line (a plugin's error, quoted in ours)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__
