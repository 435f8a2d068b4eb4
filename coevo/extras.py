"""Optional packages, imported where they are used, with a one-line hint naming the extra that installs them.

A plain install of coevo runs every method without them; they serve one purpose each (computing the
shipped reference values, DSPy programs), so they sit in extras of the same names in pyproject.toml.
"""

from __future__ import annotations

import importlib
from types import ModuleType

MAKE_TARGETS = frozenset({"ray", "rl"})
"""Extras the Makefile installs (`make ray`, `make rl`) with torch and transformers held at constraints.txt."""


def install_hint(extra: str) -> str:
    """How to install `extra`: worded here once for every error that names an extra (docs say the same)."""
    pip = f"pip install -e '.[{extra}]' -c constraints.txt"
    return f"make {extra} (or {pip})" if extra in MAKE_TARGETS else pip


class MissingExtra(ImportError):
    """An optional package is not installed; the message is one line saying how to install it."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """`import module`, or MissingExtra: "<purpose> needs <package>: <install_hint(extra)>"."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        package = module.split(".")[0]
        if exc.name is not None and exc.name != package:
            raise  # the package is there but lacks a part or a dependency: its own error says more
        raise MissingExtra(f"{purpose} needs {package}: {install_hint(extra)}") from None
