"""Circle packing head to head: coevo, with and without ES on the weights, against OpenEvolve and
ShinkaEvolve, with the same model, budget and verifier.

    python experiments/peers/packing_table.py [--task circle_packing_26] [--systems ...] [--seeds 0 1 2 3 4]
        [--evaluations 64] [--quick] [--report-only] [--json]

Runs every (system, seed) cell not yet recorded with table.py's machinery (one `coevo serve` for the
peers; coevo's arms as `coevo run`), each from coevo's seed program for the task, and writes
experiments/peers/packing/<task>.md and <task>.json (packing_rows.py). Records are committed under
experiments/peers/packing/cells/<model>/, so the table resumes across sessions; a cell's bulky files
stay in the git-ignored experiments/peers/work/packing/. Every peer scores a candidate by calling
coevo's task evaluation (scoring.py), so the verifier is coevo's exact one for everyone; OpenEvolve is
given the task's description as its system message, as ShinkaEvolve (its task_sys_msg) and coevo are.

coevo's arms: EoH with diff edits on the mutations ({diff = 0.6, full = 0.4}, ShinkaEvolve's
diff/full ratio) and two islands migrating every generation, the search settings of the two peers;
`coevo-eoh+es` is the same with ES on the weights (method eoh+es). At 64 evaluations and a population
of 10 a run has about one and a half EoH generations, so a migration every generation is the only
interval that happens at all.

--quick: 4 evaluations, SmolLM2, 128-token answers, seed 0: a plumbing check; it writes under
experiments/peers/work/packing-quick/ only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(PEERS_DIR.parents[1]), str(PEERS_DIR)]

from packing_rows import markdown, packing_rows  # noqa: E402
from table import CoevoArms, run_cells, shared_arguments  # noqa: E402

from tasks import get_task  # noqa: E402
from tasks.circle_packing import RECORDS  # noqa: E402

TASKS = ("circle_packing_26", "circle_packing_32")
SEARCH = ("operators.edit={diff = 0.6, full = 0.4}", "population.islands=2", "population.migration_interval=1")
"""The search settings of both coevo arms: diff edits and islands (module docstring)."""
ARMS: CoevoArms = {"coevo-eoh": ("eoh", SEARCH), "coevo-eoh+es": ("eoh+es", SEARCH)}
SYSTEMS = (*ARMS, "openevolve", "shinka")
PEER_FLAGS = {"openevolve": ["--describe-task"]}
"""Per peer, the options its script gets beyond the shared ones."""
PACKING_DIR = PEERS_DIR / "packing"


def cell_command(task: str, system: str, seed: int) -> str:
    """The command that runs exactly one cell of the table."""
    task_option = "" if task == TASKS[0] else f" --task {task}"
    return f"python experiments/peers/packing_table.py{task_option} --systems {system} --seeds {seed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="a plumbing check (SmolLM2, 4 evaluations, seed 0)")
    parser.add_argument("--task", default=TASKS[0], choices=TASKS)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    out = PACKING_DIR
    args.work, args.cells, args.arms, args.peer_flags = PEERS_DIR / "work" / "packing", out / "cells", ARMS, PEER_FLAGS
    args.val_limit = args.test_limit = None  # one instance per split
    if args.quick:
        args.evaluations, args.model, args.seeds, args.max_tokens = 4, "smollm2-135m", [0], 128
        out = args.work = args.cells = PEERS_DIR / "work" / "packing-quick"
    wanted = [] if args.report_only else [(system, args.task, seed) for system in args.systems for seed in args.seeds]
    cells = run_cells(wanted, args)
    record = RECORDS[get_task(args.task).n]  # type: ignore[attr-defined]
    blocks = packing_rows(cells, args.task, SYSTEMS, args.seeds, record)
    intro = {"model": args.model, "budget": args.evaluations, "max_tokens": args.max_tokens}
    text = markdown(blocks, args.task, record, intro, lambda system, seed: cell_command(args.task, system, seed))
    out.mkdir(parents=True, exist_ok=True)
    payload = {"task": args.task, "record": record, **intro, "rows": blocks}
    (out / f"{args.task}.json").write_text(json.dumps(payload, indent=1) + "\n")
    (out / f"{args.task}.md").write_text(text)
    print(json.dumps(blocks, indent=1) if args.json else text)


if __name__ == "__main__":
    main()
