"""A heuristic's numeric parameters: read them, and write a copy of the code with new values.

The `tune` operator asks the model only for new values of a parent's float literals and splices them
back into the parent's code at the token level (comments and layout survive). A small model that cannot
copy a 20-line function faithfully can still propose numbers, and the code around them stays correct.
Zero literals are left out: they are floors and offsets far more often than tunable weights.

>>> code = "def f(x):\\n    return 0.4 * x - 0.1  # weights\\n"
>>> tunable_values(code)
[0.4, 0.1]
>>> print(with_values(code, [0.5, -0.2]), end="")
def f(x):
    return 0.5 * x - (-0.2)  # weights
"""

from __future__ import annotations

import io
import math
import re
import tokenize
from collections.abc import Sequence

from coevo.operators.parsing import ParseFailure

_LIST = re.compile(r"\[([^\[\]]*)\]")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _float_tokens(code: str) -> list[tokenize.TokenInfo]:
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return [
        t
        for t in tokens
        if t.type == tokenize.NUMBER
        and not t.string.lower().endswith("j")
        and not t.string.lower().startswith(("0x", "0o", "0b"))
        and any(c in t.string.lower() for c in ".e")
        and float(t.string.replace("_", "")) != 0.0
    ]


def tunable_values(code: str) -> list[float]:
    """The non-zero float literals of `code`, in order of appearance."""
    return [float(t.string.replace("_", "")) for t in _float_tokens(code)]


def with_values(code: str, values: Sequence[float]) -> str:
    """`code` with its tunable literals replaced by `values` (negative ones parenthesised)."""
    tokens = _float_tokens(code)
    if len(tokens) != len(values):
        raise ValueError(f"code has {len(tokens)} tunable values, got {len(values)}")
    lines = code.splitlines(keepends=True)
    for token, value in sorted(zip(tokens, values, strict=True), key=lambda pair: pair[0].start, reverse=True):
        (row, start), (_, end) = token.start, token.end
        text = repr(float(value)) if value >= 0 else f"({float(value)!r})"
        line = lines[row - 1]
        lines[row - 1] = line[:start] + text + line[end:]
    return "".join(lines)


def parse_values(text: str, count: int) -> list[float] | ParseFailure:
    """The last bracketed list of exactly `count` finite numbers in `text` (models often echo the old one first)."""
    for body in reversed(_LIST.findall(text)):
        items = [item.strip() for item in body.split(",") if item.strip()]
        if len(items) == count and all(_NUMBER.fullmatch(item) for item in items):
            values = [float(item) for item in items]
            if all(math.isfinite(v) for v in values):
                return values
    return ParseFailure(f"expected a list of {count} numbers like [{', '.join(['0.5'] * count)}]")
