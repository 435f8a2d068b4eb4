"""The heuristics a run starts from (config key `library`), read from `heuristics/`.

`heuristics/seed/<task>.py` is the task's seed; `heuristics/evolved/<task>__<name>.py` are winners
exported from earlier runs (`coevo runs export`), so a library grows as runs finish. The classical
baselines are whole solvers, not heuristics of the task's signature, so they never seed a population.
"""

from __future__ import annotations

from tasks.base import SEED_DIR, Task

EVOLVED_DIR = SEED_DIR.parent / "evolved"


def starting_heuristics(task: Task, which: str) -> dict[str, str]:
    """name -> code for `which` in none | seed | all, in a stable order."""
    if which == "none":
        return {}
    codes = {"seed": task.seed_code()}
    if which == "all":
        for path in sorted(EVOLVED_DIR.glob(f"{task.name}__*.py")):
            codes[path.stem.split("__", 1)[1]] = path.read_text(encoding="utf-8")
    return codes
