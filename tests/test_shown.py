"""Candidate text is data: control characters and lone surrogates reach no terminal, page or log raw."""

from __future__ import annotations

import json
from pathlib import Path

from coevo.candidate import Candidate
from coevo.run.store import RunStore
from coevo.shown import shown
from coevo.workload import Evaluation

REASON = "pick raised ValueError: \rvalid; objective 5.\x1b[K \u202edecoy half of a pair \ud800"


def test_unsafe_characters_are_shown_as_escapes_and_everything_else_is_kept() -> None:
    assert shown(REASON) == "pick raised ValueError: \\rvalid; objective 5.\\x1b[K \\u202edecoy half of a pair \\ud800"
    assert shown("naïve 中文 €\n\tx") == "naïve 中文 €\\n\\tx"
    assert shown("def f():\n\treturn '\x1b'\r\n", lines=True) == "def f():\n\treturn '\\x1b'\\r\n"
    shown(REASON).encode("utf-8")  # a terminal can print it, whatever its encoding of Unicode


def test_the_run_store_records_a_reason_no_encoder_accepts(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"method": "sample", "task": "probe"})
    candidate = Candidate(code="def pick(values):\n    return 0\n", thought="", operator="i1", generation=1, reason=REASON)
    store.add_candidate(1, candidate, None, Evaluation("min", "search", (), None, reason=REASON))
    (logged,) = store._db.execute("SELECT reason FROM evaluations").fetchone()
    assert logged == shown(REASON)
    (data,) = store._db.execute("SELECT data FROM candidates").fetchone()
    assert json.loads(data)["reason"] == REASON  # the candidate's own record stays exact
