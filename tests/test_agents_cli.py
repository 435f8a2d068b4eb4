"""`coevo tasks list` and `coevo tasks eval` for agent environments: rows, and one-line exit-2 errors."""

from __future__ import annotations

import json

import pytest

from tasks import TASK_NAMES
from tasks.agents import ENV_NAMES

from cli_capture import run_cli


def test_tasks_list_shows_environments_after_the_heuristic_tasks_with_their_horizon(capsys):
    code, out, _ = run_cli(capsys, "tasks", "list", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [row["name"] for row in rows] == [*TASK_NAMES, *ENV_NAMES]
    agents = {row["name"]: row for row in rows if row["kind"] == "agent"}
    assert agents["sudoku"]["horizon"] == [5, 10, 15, 20]
    assert agents["sudoku"]["reference"] == "H in {5, 10, 15, 20}: blank cells"
    assert agents["gridnav"]["signature"] == "move <up|down|left|right>"


def test_tasks_list_table_names_the_horizon_knob(capsys):
    code, out, _ = run_cli(capsys, "tasks", "list")
    assert code == 0 and "gridnav" in out and "agent" in out and "H in" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tasks", "eval", "chess"], "unknown task 'chess'; known tasks: asp_construct"),
        (["tasks", "eval", "sudoku", "--horizon", "7"], "horizon 7 is out of range for sudoku; choose one of: 5, 10"),
        (["tasks", "eval", "gridnav", "--split", "train"], "unknown split 'train'"),
        (["tasks", "eval", "gridnav", "--split", "val", "--episodes", "33"], "the val split of gridnav has 32"),
        (["tasks", "eval", "gridnav", "--model", "/no/such/model", "--episodes", "1"], "is neither an embedded model"),
        (["tasks", "eval", "kp_construct"], "kp_construct is a heuristic task: give the FILE.py"),
        (["tasks", "eval", "gridnav", "heuristic.py"], "gridnav is an agent environment: it takes no FILE.py"),
    ],
)
def test_bad_agent_eval_input_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("coevo: error: ") and message in err
