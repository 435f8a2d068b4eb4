"""`coevo new task NAME`: a small, real problem to start one's own from.

The problem written is online load balancing: jobs arrive one at a time and the heuristic picks the
machine each goes to, to keep the largest load (the makespan) small. It is small enough to read in a
minute and real enough to evolve: the seed heuristic (least-loaded machine) is a classical rule with
room above it, and a lower bound (the larger of the longest job and the mean load) gives every
instance a reference, so gaps show from the first run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

import typer

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class ScaffoldError(ValueError):
    """A bad name, or a directory that already holds the files; one line for the CLI."""


PROBLEM = '''"""{title}: jobs arrive one at a time; put each on a machine at once, keeping the makespan small.

A coevo problem: instances per split, a trusted driver that asks the heuristic for each decision and
checks it, a scorer, and a seed heuristic (seed.py). Only the heuristic runs in coevo's sandbox; this
file runs outside it. Evaluate and evolve it with the commands `coevo new task` printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks import InstanceGroup, InvalidSolution, Task
from tasks.base import Heuristic, Instance, SplitName

SPLIT_SEEDS = {{"search": 1, "val": 2, "test": 3}}
"""One generator seed per split: the instances are the same on every machine and every run."""
SIZES = {{"search": 16, "val": 16, "test": 64}}
MACHINES, JOBS = 8, 200


class {class_name}(Task):
    name = "{name}"
    function_name = "choose_machine"
    signature = "choose_machine(job: float, loads: np.ndarray) -> int"
    description = (
        "Jobs arrive one at a time and each must go to one of the machines at once, without knowing the jobs "
        "still to come. choose_machine gets the new job's length and the current load of every machine, and "
        "returns the index of the machine that takes the job. Minimise the makespan: the largest final load."
    )
    reference_name = "lower bound max(longest job, mean load)"
    sense = "min"

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        rng = np.random.default_rng(SPLIT_SEEDS[split])
        instances = [
            {{"jobs": rng.lognormal(0.0, 1.0, JOBS), "machines": np.int64(MACHINES)}} for _ in range(SIZES[split])
        ]
        return [InstanceGroup(f"m{{MACHINES}}_n{{JOBS}}", instances)]

    async def drive(self, heuristic: Heuristic, instance: Instance) -> np.ndarray:
        """The online loop (trusted): every answer is checked before it is applied."""
        loads = np.zeros(int(instance["machines"]))
        assignment = []
        for job in instance["jobs"]:
            machine = await heuristic(float(job), loads.copy())
            if isinstance(machine, bool) or not isinstance(machine, (int, np.integer)):
                raise InvalidSolution(f"choose_machine returned {{machine!r}}, expected an int")
            if not 0 <= machine < loads.size:
                raise InvalidSolution(f"choose_machine returned {{machine}}, not a machine in 0..{{loads.size - 1}}")
            loads[machine] += job
            assignment.append(int(machine))
        return np.asarray(assignment, dtype=np.int64)

    def score(self, instance: Instance, solution: Any) -> float:
        """The makespan of the assignment, recomputed here from the instance."""
        assignment = np.asarray(solution)
        machines = int(instance["machines"])
        if assignment.shape != instance["jobs"].shape or assignment.min() < 0 or assignment.max() >= machines:
            raise InvalidSolution("the assignment does not give every job a machine")
        return float(np.bincount(assignment, weights=instance["jobs"], minlength=machines).max())

    def references(self, split: SplitName, group: InstanceGroup) -> list[float]:
        """A lower bound per instance: no machine finishes before the longest job or the mean load."""
        return [float(max(i["jobs"].max(), i["jobs"].sum() / int(i["machines"]))) for i in group.instances]

    def seed_code(self) -> str:
        return Path(__file__).with_name("seed.py").read_text()
'''

SEED = '''import numpy as np


def choose_machine(job: float, loads: np.ndarray) -> int:
    """Least-loaded machine: the classical list-scheduling rule."""
    return int(np.argmin(loads))
'''

TEST = '''"""The problem's own checks: its seed heuristic is valid in the sandbox, and a bad answer is refused."""

from pathlib import Path

from coevo.evaluate import Evaluator

HERE = Path(__file__).resolve().parent
SPEC = f"{{HERE / 'problem.py'}}:{class_name}"


def test_the_seed_heuristic_is_valid_and_near_the_bound():
    with Evaluator(SPEC, "val", limit=4) as evaluator:
        result = evaluator.evaluate((HERE / "seed.py").read_text())
    assert result.valid, result.reason
    assert 0 <= result.gap_pct < 50


def test_a_machine_that_does_not_exist_is_refused_with_its_reason():
    with Evaluator(SPEC, "val", limit=4) as evaluator:
        result = evaluator.evaluate("def choose_machine(job, loads):\\n    return len(loads)\\n")
    assert not result.valid and "not a machine" in result.reason
'''

CONFIG = '''# coevo run {directory}/run.toml: EoH on {name}, with the embedded model (a few minutes on a laptop CPU).
method = "eoh"
task = "problem.py:{class_name}"
model = "smollm2-135m"
budget = 24
seed = 0
population_size = 4

[eval]
limit = 8
'''


def write_task(name: str, directory: Path) -> list[Path]:
    """Write the problem `name` into `directory / name`; ScaffoldError before anything is written."""
    if not _NAME.match(name):
        raise ScaffoldError(f"task name must be lower-case letters, digits and underscores, got {name!r}")
    target = directory / name
    files = {
        "problem.py": PROBLEM,
        "seed.py": SEED,
        f"test_{name}.py": TEST,
        "run.toml": CONFIG,
    }
    existing = [target / file for file in files if (target / file).exists()]
    if existing:
        raise ScaffoldError(f"{existing[0]} already exists: choose another name or --dir")
    class_name = _class_name(name)
    values = {"name": name, "class_name": class_name, "title": name.replace("_", " ").capitalize(), "directory": target}
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for file, template in files.items():
        path = target / file
        path.write_text(template.format(**values), encoding="utf-8")
        written.append(path)
    return written


def next_steps(name: str, directory: Path) -> str:
    """The commands that evaluate, test and evolve the problem just written."""
    target = directory / name
    class_name = _class_name(name)
    return "\n".join(
        [
            f"wrote {target}/: problem.py, seed.py, test_{name}.py, run.toml",
            f"  coevo tasks eval {target}/problem.py:{class_name} {target}/seed.py   # score the seed heuristic",
            f"  python -m pytest {target}                                            # the problem's own tests",
            f"  coevo run {target}/run.toml                                          # evolve it",
        ]
    )


def _class_name(name: str) -> str:
    """The problem class's name: `load_balance` -> `LoadBalance`."""
    return "".join(part.capitalize() for part in name.split("_"))


def register(app: typer.Typer, fail: Callable[[str], NoReturn]) -> None:
    """Add `coevo new task NAME [--dir DIR]` to the command line."""
    new_app = typer.Typer(no_args_is_help=True, help="Start your own problem from a small, real one.")
    app.add_typer(new_app, name="new")

    @new_app.command("task")
    def new_task(
        name: Annotated[str, typer.Argument(help="The problem's name: lower-case letters, digits, underscores.")],
        directory: Annotated[Path, typer.Option("--dir", help="Where the problem's folder goes.")] = Path("."),
    ) -> None:
        """Write a runnable problem (online load balancing) with its seed heuristic, a test and a run config."""
        try:
            write_task(name, directory)
        except (ScaffoldError, OSError) as exc:
            fail(str(exc))
        print(next_steps(name, directory))
