"""The published-baselines table (experiments/bench/RESULTS.md) quotes what `coevo tasks baselines --split
test` prints, reference included.

The figures are recomputed the way the command computes them (the task's seed and classical solvers,
`evaluate_split`, gaps to two decimals) on just the groups each row names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks import get_task
from tasks.baselines import classical_files, evaluate_split, file_solver, seed_solver

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "bench" / "RESULTS.md"
HEADER = "| task | heuristic | measured | published |"
GROUPS = {
    "bpp_online Weibull 5k / 10k": (["5k_c100", "10k_c100"], "% over L1"),
    "bpp_online Weibull 5k": (["5k_c100"], "% over L1"),
    "bpp_online OR1 / OR2 / OR3 / OR4": (["or1", "or2", "or3", "or4"], "% over best known"),
    "tsp_construct n50 / 100 / 200": (["n50", "n100", "n200"], "%"),
    "kp_construct n50 / 100 / 200": (["n50", "n100", "n200"], "%"),
}
"""Row label -> the command's groups in the row's order, and the reference its figures are over
(the construction tasks' single reference is the task table's)."""
HEURISTICS = {
    "best fit": "best_fit",
    "first fit": "first_fit",
    "seed (FunSearch's priority)": "seed",
    "nearest neighbour": "nearest_neighbour",
    "farthest insertion": "farthest_insertion",
    "seed (ReEvo's score)": "seed",
    "greedy value/weight": "greedy",
}


def readme_rows(task: str) -> list[tuple[str, str, str]]:
    """(label, heuristic, measured) of the baseline table's rows for `task`."""
    table = RESULTS.read_text(encoding="utf-8").split(HEADER, 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.strip().splitlines()[1:]]
    return [(label, heuristic, measured) for label, heuristic, measured, _ in rows if label.startswith(f"{task} ")]


def command_gaps(task_name: str, heuristic: str, groups: list[str]) -> list[str]:
    """The gap column `coevo tasks baselines TASK --split test` prints for `heuristic` on `groups`."""
    task = get_task(task_name)
    solve = seed_solver(task) if heuristic == "seed" else file_solver(task, classical_files(task)[heuristic])
    by_group = {result.label: result.gap_pct for result in evaluate_split(task, "test", solve, labels=set(groups))}
    return [f"{by_group[group]:.2f}" for group in groups]


def check_row(task: str, row: tuple[str, str, str]) -> None:
    label, heuristic, measured = row
    assert label in GROUPS and heuristic in HEURISTICS, f"map the row {row} to the command's groups"
    groups, reference = GROUPS[label]
    assert measured.endswith(reference), f"{label}: the figures are {reference}, say so"
    quoted = re.findall(r"\d+\.\d+", measured)
    assert quoted == command_gaps(task, HEURISTICS[heuristic], groups)


@pytest.mark.parametrize("row", readme_rows("bpp_online"), ids=lambda row: f"{row[0]}, {row[1]}")
def test_readme_bpp_online_baselines_are_what_the_command_prints(row: tuple[str, str, str]) -> None:
    check_row("bpp_online", row)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "row"),
    [(task, row) for task in ("tsp_construct", "kp_construct") for row in readme_rows(task)],
    ids=lambda value: value if isinstance(value, str) else value[1],
)
def test_readme_construction_baselines_are_what_the_command_prints(task: str, row: tuple[str, str, str]) -> None:
    """Their 1000-instance groups take minutes: the slow suite checks them."""
    check_row(task, row)
