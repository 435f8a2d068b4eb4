"""The shared evaluator and its sandbox: untrusted candidate code in, trusted verdicts out.

``Evaluator(task, split).evaluate(code) -> EvalResult`` is the entry point; ``Limits`` sets the
per-instance and per-candidate budgets.
"""

from coevo.evaluate.evaluator import EvalResult, Evaluator
from coevo.evaluate.policy import ALLOWED_MODULES, RejectedCode, check_code
from coevo.evaluate.sandbox import Limits, SandboxError

__all__ = ["ALLOWED_MODULES", "EvalResult", "Evaluator", "Limits", "RejectedCode", "SandboxError", "check_code"]
