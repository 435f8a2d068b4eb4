"""Naming a plugin the way the Python ecosystem does: a file, a module, or an entry point.

A spec is one of
  * ``path/to/problem.py:ClassName``: a class in a file (the path relative to the current directory);
  * ``package.module:ClassName``: a class in an importable module;
  * ``name``: a name registered under an entry-point group (``coevo.tasks``, ``coevo.envs``), which is
    how coevo registers its own tasks and environments too, so built-ins are not special.

Every failure is a `PluginError` whose message is one line naming the spec and what is wrong, for the
CLI to print as it is.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

_FILE_MODULES: dict[str, str] = {}
"""Module name -> absolute path of every plugin file imported in this process."""


class PluginError(ValueError):
    """A plugin that cannot be found or loaded; the message is one line for the user."""


def is_spec(name: str) -> bool:
    """Whether `name` names a file or module (``...:Class``) rather than a registered name."""
    return ":" in name


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
    if not is_spec(name):
        return name
    where, _, attribute = name.rpartition(":")
    if not _is_path(where):
        return name
    path = Path(where).expanduser()
    return f"{((base or Path.cwd()) / path).resolve()}:{attribute}"


def load(group: str, name: str, kind: str) -> type:
    """The class that `name` names in `group`; `kind` ("task", "environment") words the errors."""
    if not is_spec(name):
        known = registered(group)
        if name not in known:
            shown = ", ".join(known) or "none"
            raise PluginError(
                f"unknown {kind} {name!r}; registered {kind}s: {shown} (or name one as path/to/file.py:Class "
                "or package.module:Class)"
            )
        name = known[name]
    where, _, attribute = name.rpartition(":")
    if not where or not attribute:
        raise PluginError(f"{kind} {name!r}: expected path/to/file.py:Class or package.module:Class")
    module = _module_from_file(where, kind, name) if _is_path(where) else _module(where, kind, name)
    found = getattr(module, attribute, None)
    if not isinstance(found, type):
        what = "is not a class" if found is not None else "is not defined there"
        raise PluginError(f"{kind} {name!r}: {attribute} {what}")
    return found


def spec_of(cls: type) -> str:
    """The spec that loads `cls` again in another process: ``file.py:Class`` for a class loaded from a
    file, ``module:Class`` otherwise."""
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


def _module_from_file(path_text: str, kind: str, spec: str) -> ModuleType:
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
