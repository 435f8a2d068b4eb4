"""Text that a candidate wrote, made safe to show: it is data, never terminal control.

A reason, a note or a name that came from a candidate (or from the LLM that wrote it) can hold a
carriage return and ANSI escapes that draw over what a terminal shows, or a lone surrogate that
no encoder accepts (printing it, or storing it in SQLite, raises UnicodeEncodeError). ``shown``
writes every such character as its Python escape (``\\r``, ``\\x1b``, ``\\ud800``), so the text
keeps its meaning and loses its effect. Output meant for programs (``--json``) stays exact:
``json.dumps`` escapes these characters itself.
"""

from __future__ import annotations

import re
import unicodedata

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Controls (C0, DEL, C1: carriage return, escape), format characters (bidirectional overrides,
zero-width joiners), lone surrogates, and line and paragraph separators."""
_SUSPECT = re.compile(r"[^\x20-\x7e]")
_SUSPECT_BUT_LINES = re.compile(r"[^\x20-\x7e\n\t]")


def shown(text: str, *, lines: bool = False) -> str:
    """``text`` with every unsafe character written as its escape; ``lines`` keeps newlines and
    tabs (code, multi-line messages), otherwise the result is one line."""
    return (_SUSPECT_BUT_LINES if lines else _SUSPECT).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    if unicodedata.category(character) in _UNSAFE_CATEGORIES:
        return character.encode("unicode_escape").decode("ascii")
    return character
