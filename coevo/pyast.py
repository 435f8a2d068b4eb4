"""Parsing, compiling and hashing candidate code safely from any thread, with one wording for refusals.

CPython before 3.12.4 keeps the AST builder's recursion depth in per-interpreter state. Two threads
parsing at once share that count: any Python code run mid-parse (a garbage-collection callback or a
finalizer is enough) can switch threads, and ``ast.parse`` then raises ``SystemError: AST constructor
recursion depth mismatch`` on perfectly valid code (CPython gh-106905). The evaluator checks candidates from a
thread pool, so every parse in coevo goes through the lock here. (Compiling source does not build
Python AST objects and needs no lock.)

The parser and compiler signal code nested too deeply (``1+1+...`` a hundred thousand times) with
RecursionError or MemoryError; both are turned into a SyntaxError here, so every caller that refuses
unparsable code refuses such code too, instead of crashing on it.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import threading
import types
from collections.abc import Iterator

_PARSE_LOCK = threading.Lock()
TOO_DEEP = "the code is nested too deeply to parse"


@contextlib.contextmanager
def _depth_limits_as_syntax_errors() -> Iterator[None]:
    try:
        yield
    except (RecursionError, MemoryError):
        raise SyntaxError(TOO_DEEP) from None


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` made safe to call from several threads; raises SyntaxError or ValueError."""
    with _PARSE_LOCK, _depth_limits_as_syntax_errors():
        return ast.parse(source, filename=filename)


def compile_module(source: str, filename: str) -> types.CodeType:
    """``source`` compiled as a module without this caller's ``__future__`` flags; raises SyntaxError
    or ValueError. Compiling is not running: no code of ``source`` executes."""
    with _depth_limits_as_syntax_errors():
        return compile(source, filename, "exec", dont_inherit=True)


def unparsable_reason(error: SyntaxError | ValueError) -> str:
    """The one-line reason for source that would not parse or compile (ValueError: NUL bytes,
    lone surrogates)."""
    if isinstance(error, SyntaxError):
        return f"syntax error at line {error.lineno}: {error.msg}" if error.lineno else f"syntax error: {error.msg}"
    return f"unparsable code: {error}"


def source_sha256(source: str) -> str:
    """Hex SHA-256 of ``source``; surrogatepass because a lone surrogate (a JSON escape can carry one)
    must hash, not crash whoever asks."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
