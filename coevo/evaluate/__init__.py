"""The shared evaluator and its sandbox: untrusted candidate code in, trusted verdicts out.

``Evaluator(task, split).evaluate(code) -> EvalResult`` is the entry point; ``Limits`` sets the
per-instance and per-candidate budgets.

Exports are resolved lazily: the fork server imports this package too, and everything it has
imported is copied into every candidate's process, so the package itself must stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coevo.evaluate.evaluator import EvalResult, Evaluator
    from coevo.evaluate.policy import ALLOWED_MODULES, RejectedCode, check_code
    from coevo.evaluate.sandbox import Limits, SandboxError

_EXPORTS = {
    "EvalResult": "coevo.evaluate.evaluator",
    "Evaluator": "coevo.evaluate.evaluator",
    "ALLOWED_MODULES": "coevo.evaluate.policy",
    "RejectedCode": "coevo.evaluate.policy",
    "check_code": "coevo.evaluate.policy",
    "Limits": "coevo.evaluate.sandbox",
    "SandboxError": "coevo.evaluate.sandbox",
}

__all__ = ["ALLOWED_MODULES", "EvalResult", "Evaluator", "Limits", "RejectedCode", "SandboxError", "check_code"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
