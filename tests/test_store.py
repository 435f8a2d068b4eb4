"""The run store's edges: an inconsistent answer, readers on a shared connection, the JSONL mirror."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_runner import config

from coevo.es.update_log import HISTORY_FILENAME
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore, StoreError


def test_an_answer_missing_from_the_candidates_is_a_one_line_error(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"method": "sample", "task": "tsp_construct"})
    store.set_meta("validation", json.dumps({"best_key": "0123456789abcdef", "split": "val"}))
    with pytest.raises(StoreError, match=r"^.*0123456789abcdef[^\n]*$"):
        store.answer()


class _Recording:
    """A connection stand-in that records every attribute assignment made on it."""

    def __init__(self, connection) -> None:
        object.__setattr__(self, "connection", connection)
        object.__setattr__(self, "assigned", [])

    def __getattr__(self, name: str):
        return getattr(self.connection, name)

    def __setattr__(self, name: str, value) -> None:
        self.assigned.append(name)
        setattr(self.connection, name, value)


def test_reading_llm_calls_leaves_the_shared_connection_alone(tmp_path: Path) -> None:
    runner = start_run(config("sample", budget=7), tmp_path)
    runner.run()
    recording = _Recording(runner.store._db)
    runner.store._db = recording
    calls = runner.store.llm_calls()
    assert calls and {"operator", "prompt", "response", "weights"} <= set(calls[0])
    assert recording.assigned == [], "other threads share this connection"
    runner.close()


def _mirror(run_dir: Path) -> list[str]:
    return (run_dir / HISTORY_FILENAME).read_text().splitlines()


def test_the_history_mirror_is_appended_to_not_rewritten(tmp_path: Path) -> None:
    runner = start_run(config("sample+es", budget=31), tmp_path)
    path = tmp_path / HISTORY_FILENAME
    while not path.exists():
        runner.run_step()
    with open(path) as first:  # held open, so its inode cannot be reused by a rewrite
        while not runner.finished:
            runner.run_step()
            assert _mirror(tmp_path) == [r.to_json() for r in runner.store.es_records()]
        assert len(runner.store.es_records()) > 2
        assert first.read().splitlines() == _mirror(tmp_path), "the same file grew"
    runner.close()


def test_a_resumed_run_rewrites_a_torn_mirror_once(tmp_path: Path) -> None:
    runner = start_run(config("sample+es", budget=31), tmp_path)
    for _ in range(3):
        runner.run_step()
    runner.close()
    with open(tmp_path / HISTORY_FILENAME, "a") as mirror:
        mirror.write('{"step": 99, "se')  # a crash in the middle of an append
    resumed = resume_run(tmp_path)
    resumed.run()
    assert _mirror(tmp_path) == [r.to_json() for r in resumed.store.es_records()]
    resumed.close()
