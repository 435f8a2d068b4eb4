"""Optional packages, imported where they are used, with a one-line hint naming the extra that installs them.

A plain install of coevo runs every method without them; they serve one purpose each (computing the
shipped reference values, DSPy programs), so they sit in extras of the same names in pyproject.toml.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ImportError):
    """An optional package is not installed; the message is one line saying how to install it."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """`import module`, or MissingExtra: "<purpose> needs <package>: pip install 'coevo[<extra>]'"."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        package = module.split(".")[0]
        if exc.name is not None and exc.name != package:
            raise  # the package is there but lacks a part or a dependency: its own error says more
        raise MissingExtra(f"{purpose} needs {package}: pip install 'coevo[{extra}]'") from None
