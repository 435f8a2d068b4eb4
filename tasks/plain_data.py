"""What a solution may be to cross from the sandboxed child to the trusted side: plain data only (None,
bools, ints, finite or tagged floats, strings, lists, tuples, dicts with string keys, numeric numpy
scalars and arrays), as tagged JSON. Anything else could carry code, so it is an invalid solution. The
channel (`coevo.evaluate.channel`) frames it; program tasks check an evaluator's arguments with it."""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from tasks.base import InvalidSolution

NUMERIC_KINDS = frozenset("biuf")


def encode_solution(value: Any) -> Any:
    """Plain data as tagged JSON; anything else is an invalid solution (it could carry code)."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind is list:
        return [encode_solution(item) for item in value]
    if kind is tuple:
        return {"tuple": [encode_solution(item) for item in value]}
    if kind is dict and all(type(key) is str for key in value):
        return {"dict": [[key, encode_solution(item)] for key, item in value.items()]}
    if isinstance(value, np.generic) and kind.__module__ == "numpy" and value.dtype.kind in NUMERIC_KINDS:
        return encode_solution(value.item())
    if kind is np.ndarray and value.dtype.kind in NUMERIC_KINDS:
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode()
        return {"ndarray": [value.dtype.str, list(value.shape), data]}
    raise InvalidSolution(f"the solution contains a {kind.__name__}, which cannot leave the sandbox")
