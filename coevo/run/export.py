"""`coevo runs export`: a run's answer joins the skill library, with where it came from.

The file is the heuristic's code (a program task's whole program) under a comment header holding its provenance as JSON (run, method,
config seed, objectives, weights reference, lineage), so a reader can trace it back to the run that
wrote it. It goes to a directory of the user's (default `./skills/`), never inside the installed
package: copy it to `heuristics/evolved/` to have `library = "all"` runs start from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from coevo.run.store import RunStore
from tasks import get_task

_NAME = re.compile(r"^[A-Za-z0-9_]+$")
DEFAULT_DIR = Path("skills")
"""Where an export goes without `--out`: relative to the working directory."""


class ExportError(Exception):
    """Nothing exportable, or a bad name."""


def default_name(method: str, seed: int, key: str) -> str:
    """`<method>_s<seed>_<key prefix>`, the method (or a method spec's class) with every character the
    name rule refuses (`+`, `-`) made `_`: `hill-climb` -> `hill_climb_s0_1a2b3c4d`."""
    return f"{re.sub(r'[^A-Za-z0-9_]', '_', method.rpartition(':')[2])}_s{seed}_{key[:8]}"


def export_best(run_dir: Path, name: str | None = None, directory: Path | None = None) -> Path:
    """Write the run's answer to `directory` and return the file's path: the finalist selected on the
    val split when the run was validated, else its best on the search split."""
    store = RunStore.open(run_dir)
    answer, chosen_on = store.answer()
    if answer is None:
        raise ExportError(f"{run_dir} has no valid heuristic to export")
    best, validation = answer.to_dict(), store.validation()
    config = store.config
    name = name or default_name(config["method"], config["seed"], best["key"])
    if not _NAME.match(name):
        raise ExportError(f"export name must be letters, digits and underscores, got {name!r}")
    provenance = {
        "run_dir": str(Path(run_dir).resolve()),
        "status": store.status(),
        "method": config["method"],
        "task": config["task"],
        "model": config["model"],
        "seed": config["seed"],
        "budget": config["budget"],
        "key": best["key"],
        "chosen_on": chosen_on,
        "operator": best["operator"],
        "parents": best["parents"],
        "prompt_id": best["prompt_id"],
        "weights": best["weights"],
        "search": {"objective": best["objective"], "gap_pct": best["gap_pct"]},
        "val": None if validation is None or validation["best_key"] != best["key"] else validation["best"],
        "thought": best["thought"],
    }
    header = "\n".join(f"# {line}" for line in json.dumps(provenance, indent=1).splitlines())
    target_dir = directory or DEFAULT_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    task = get_task(config["task"])
    code = task.module_source(best["code"])  # a program task's answer is its whole program
    path = target_dir / f"{task.name}__{name}.py"
    path.write_text(f"# coevo provenance (exported from a run):\n{header}\n\n{code.strip()}\n", encoding="utf-8")
    return path
