"""Checks applied to what an untrusted heuristic returns, with messages that name the culprit.

Every task drives a candidate function step by step; these helpers turn its raw return value
into a clean Python/numpy value or raise ``InvalidSolution`` saying which function returned what.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from tasks.base import InvalidSolution


def _shown(value: Any, limit: int = 60) -> str:
    """A short, safe rendering of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def returned_index(value: Any, function_name: str) -> int:
    """The value as a plain int; bools, floats, NaN and other types are rejected."""
    if type(value) is int:  # the common case, and every answer that crossed the sandbox's channel
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidSolution(
            f"{function_name} returned {_shown(value)} of type {type(value).__name__}, expected an int"
        )
    return int(value)


def returned_number(value: Any, function_name: str) -> float:
    """The value as a finite float; NaN, inf, bools and non-numbers are rejected."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidSolution(
            f"{function_name} returned {_shown(value)} of type {type(value).__name__}, expected a number"
        )
    number = float(value)
    if not math.isfinite(number):
        raise InvalidSolution(f"{function_name} returned {number}, expected a finite number")
    return number


def returned_scores(value: Any, function_name: str, length: int) -> np.ndarray:
    """The value as a finite float vector of the given length (one score per option)."""
    try:
        scores = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InvalidSolution(
            f"{function_name} returned {_shown(value)}, expected {length} numeric scores"
        ) from None
    if scores.shape != (length,):
        raise InvalidSolution(
            f"{function_name} returned scores of shape {scores.shape}, expected ({length},)"
        )
    if not np.all(np.isfinite(scores)):
        bad = scores[~np.isfinite(scores)][0]
        raise InvalidSolution(f"{function_name} returned a non-finite score ({bad})")
    return scores
