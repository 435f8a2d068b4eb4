"""One lock around ``ast.parse`` so threads can parse candidate code at the same time.

CPython before 3.12.4 keeps the AST builder's recursion depth in per-interpreter state. Two threads
parsing at once share that count: any Python code run mid-parse (a garbage-collection callback or a
finalizer is enough) can switch threads, and ``ast.parse`` then raises ``SystemError: AST constructor
recursion depth mismatch`` on perfectly valid code (CPython gh-106905). The evaluator checks candidates from a
thread pool, so every parse in coevo goes through here.
"""

from __future__ import annotations

import ast
import threading

_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` made safe to call from several threads; raises what ``ast.parse`` raises."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)
