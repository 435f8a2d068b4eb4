"""The evidence file, `results.json`: one object whose keys the measuring scripts each own. A script
replaces its own key and keeps the others, so scripts run in any order and any number of times."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.json"


def merge(key: str, value: object, path: Path = RESULTS) -> None:
    """Write `value` under `key`, keeping the file's other keys; atomic, so a crash leaves the old file."""
    evidence = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    evidence[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(".json.tmp")
    staging.write_text(json.dumps(evidence, indent=2) + "\n", encoding="utf-8")
    staging.replace(path)


def read(key: str, path: Path = RESULTS) -> dict:
    """What the file holds under `key` (empty when the file or the key is missing)."""
    return json.loads(path.read_text(encoding="utf-8")).get(key, {}) if path.exists() else {}
