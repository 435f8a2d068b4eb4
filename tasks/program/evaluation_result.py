"""coevo's own ``EvaluationResult``, for evaluators that import ``openevolve.evaluation_result``.

Only what evaluators use: the metrics (``combined_score`` and others) and the artifacts beside
them. ``evaluator_module`` serves this module under that name while an evaluator loads, so a real
OpenEvolve install is never shadowed and never imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EvaluationResult"]


@dataclass
class EvaluationResult:
    """An evaluation's metrics (numbers, and strings such as ``error``) and its artifacts (text)."""

    metrics: dict[str, Any]
    artifacts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, metrics: dict[str, Any]) -> EvaluationResult:
        return cls(metrics=metrics)

    def to_dict(self) -> dict[str, Any]:
        return self.metrics

    def has_artifacts(self) -> bool:
        return bool(self.artifacts)
