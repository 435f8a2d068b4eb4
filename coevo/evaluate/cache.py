"""Evaluation results keyed by everything that determines them, in memory and optionally on disk.

The key covers the code, the task's definition (``tasks.base.definition_hash``: its classes and
their modules' sources, not only its name), its name, the split, the exact instance set (its
hash) and the instances' labels, the limits, and the layering asked for (the Python guards, the
kernel layers left out, and whether the evaluator runs as root, which gives each child a uid of
its own): a candidate that timed out under a tight limit may pass under a looser one, and a
plugin may keep a built-in's name and score differently, so each is a different fact.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any


def cache_key(*parts: str) -> str:
    """A stable key for the given parts (order matters)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class ResultCache:
    """A dict of JSON-able results, mirrored one file per key in ``directory`` when given."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._directory = Path(directory) if directory is not None else None
        if self._directory is not None:
            self._directory.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        if self._directory is None:
            return None
        try:
            record = json.loads((self._directory / f"{key}.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        with self._lock:
            self._memory[key] = record
        return record

    def put(self, key: str, record: dict[str, Any]) -> None:
        with self._lock:
            self._memory[key] = record
        if self._directory is not None:
            # Write then rename, so a crash never leaves a half-written entry behind.
            handle, temporary = tempfile.mkstemp(dir=self._directory, suffix=".tmp")
            with os.fdopen(handle, "w") as file:
                json.dump(record, file)
            os.replace(temporary, self._directory / f"{key}.json")
