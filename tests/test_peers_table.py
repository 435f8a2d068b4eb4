"""The head-to-head table (experiments/peers/rows.py) and the peers' shared scoring, without any peer.

rows.py turns cell records into the published rows; scoring.py is what every peer's evaluator
calls, so its verdicts must equal coevo's own Evaluator on the same split.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

PEERS_DIR = Path(__file__).resolve().parents[1] / "experiments" / "peers"


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"peers_{name}", PEERS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rows = _load("rows")
scoring = _load("scoring")


def _cell(system: str, seed: int, val: float | None, **extra: object) -> dict[str, object]:
    return {
        "system": system, "task": "tsp_construct", "seed": seed, "status": "done", "search_gap": val, "val_gap": val,
        "test_gap": None if val is None else val + 1, "evaluations": 64, "llm_calls": 70 + seed,
        "prompt_tokens": 1000, "completion_tokens": 300, "wall_s": 10.0, "valid_share": 0.5, "cut_share": 0.25,
        **extra,
    }  # fmt: skip


def test_best_so_far_ignores_invalid_and_non_finite_gaps() -> None:
    assert rows.best_so_far([None, 5.0, math.nan, 7.0, 3.0, None]) == [None, 5.0, 5.0, 5.0, 3.0, 3.0]


def test_rows_aggregate_seeds_and_keep_the_failure_reason() -> None:
    cells = [
        _cell("openevolve", 0, 4.0),
        _cell("openevolve", 1, 6.0, cut_share=0.75),
        _cell("coevo-eoh", 0, None),  # no valid candidate: counted in the seeds, no gap
        {"system": "llm4ad", "task": "tsp_construct", "seed": 0, "status": "failed", "error": "llm4ad exited 1: boom"},
    ]
    by_system = {row["system"]: row for row in rows.table_rows(cells)}
    assert [row["system"] for row in rows.table_rows(cells)] == ["coevo-eoh", "openevolve", "llm4ad"]
    openevolve = by_system["openevolve"]
    assert openevolve["seeds"] == [0, 1]
    assert openevolve["val_gap"] == {"mean": 5.0, "std": pytest.approx(math.sqrt(2)), "n": 2}
    assert openevolve["test_gap"]["mean"] == 6.0 and openevolve["llm_calls"]["mean"] == 70.5
    assert openevolve["tokens"]["mean"] == 1300 and openevolve["cut_share"]["mean"] == 0.5
    assert by_system["coevo-eoh"]["val_gap"] is None and by_system["coevo-eoh"]["seeds"] == [0]
    assert by_system["coevo-eoh"]["note"] == "no valid heuristic on seed 0"
    assert by_system["llm4ad"]["seeds"] == [] and by_system["llm4ad"]["note"] == "llm4ad exited 1: boom"
    assert set(openevolve) == set(rows.ROW_KEYS)
    json.dumps(rows.table_rows(cells))


def test_the_seed_row_comes_first_with_its_gaps_only() -> None:
    gaps = {"search_gap": 9.9, "val_gap": 12.8, "test_gap": 12.5}
    seed = {"system": rows.SEED, "task": "tsp_construct", "status": "done", **gaps}
    table = rows.table_rows([_cell("coevo", 0, 2.5), seed])
    assert [row["system"] for row in table] == [rows.SEED, "coevo"]
    assert table[0]["seeds"] == [] and table[0]["val_gap"] == {"mean": 12.8, "std": 0.0, "n": 1}
    assert table[0]["llm_calls"] is None and table[0]["tokens"] is None
    line = next(line for line in rows.markdown(table, "m", 64).splitlines() if line.startswith("| seed"))
    assert "| 9.90 | 12.80 | 12.50 | - |" in line


def test_markdown_says_how_many_seeds_a_partial_mean_covers() -> None:
    cells = [_cell("shinka", 0, None, cut_share=None), _cell("shinka", 1, 3.0)]
    line = next(line for line in rows.markdown(rows.table_rows(cells), "m", 64).splitlines() if "| shinka" in line)
    assert "| 0,1 | 3.00 (1 of 2 seeds) |" in line and "| 0.25 (1 of 2 seeds) |" in line
    assert "| 64 +- 0 |" in line and line.endswith("| no valid heuristic on seed 0 |")


def test_markdown_keeps_half_counts_visible() -> None:
    """One evaluation on one seed and none on the other is 0.5 a run, not "0"."""
    cells = [_cell("llm4ad", 0, None, evaluations=1), _cell("llm4ad", 1, None, evaluations=0)]
    line = next(line for line in rows.markdown(rows.table_rows(cells), "m", 64).splitlines() if "| llm4ad" in line)
    assert "| 0.5 +- 0.7 | 70.5 +- 0.7 |" in line


def test_markdown_has_one_line_per_row() -> None:
    table = rows.markdown(rows.table_rows([_cell("coevo", 0, 2.5), _cell("shinka", 0, 3.0)]), "m", 64)
    lines = [line for line in table.splitlines() if line.startswith("| coevo") or line.startswith("| shinka")]
    assert len(lines) == 2 and "2.50" in lines[0] and "budget 64" in table


@pytest.mark.parametrize("task_name", ["tsp_construct", "bpp_online"])
def test_peer_scoring_equals_coevo_evaluator_on_the_search_split(task_name: str) -> None:
    from coevo.evaluate import Evaluator

    seed = scoring.seed_program(task_name)
    with Evaluator(task_name, "search", workers=1) as evaluator:
        expected = evaluator.evaluate(seed)
    verdict = scoring.score_program(task_name, seed)
    assert verdict["valid"] and verdict["gap_pct"] == pytest.approx(expected.gap_pct, rel=1e-12)
    assert verdict["combined_score"] == -verdict["gap_pct"]


def test_peer_scoring_logs_every_call_and_marks_bad_programs_invalid(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "evaluations.jsonl"
    monkeypatch.setenv(scoring.LOG_ENV, str(log))
    broken = scoring.score_program("tsp_construct", "def select_next_node(a, b, c, d):\n    return 0\n")
    missing = scoring.score_program("tsp_construct", "x = 1\n")
    assert not broken["valid"] and "not an unvisited node" in broken["reason"]
    assert not missing["valid"] and broken["combined_score"] == scoring.INVALID_SCORE
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["valid"] for line in lines] == [False, False] and lines[1]["code"] == "x = 1\n"


def _plotted(cells: list[dict[str, object]], tmp_path: Path, monkeypatch):  # type: ignore[no-untyped-def]
    """The one figure table.plot draws for these cells, caught instead of saved."""
    from matplotlib.figure import Figure

    saved: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: saved.append(figure))
    _load("table").plot(cells, tmp_path / "plot.png")
    (figure,) = saved
    return figure


def test_the_plot_keeps_one_colour_per_system_across_tasks(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A system missing from one task must not shift the others' colours, or the panels disagree."""
    curve = [5.0, 4.0, None]
    cells = [
        {**_cell(system, 0, 4.0), "task": task, "curve": curve}
        for task, systems in (("bpp_online", ("coevo", "shinka")), ("tsp_construct", ("coevo", "llm4ad", "shinka")))
        for system in systems
    ]
    figure = _plotted(cells, tmp_path, monkeypatch)
    colours = [{line.get_label(): line.get_color() for line in axis.get_lines()} for axis in figure.axes]
    assert sorted(colours[0]) == ["coevo (1 seed)", "shinka (1 seed)"]
    assert len(colours[1]) == 3
    for label, colour in colours[0].items():
        assert colours[1][label] == colour
    assert len(set(colours[1].values())) == 3


def test_the_table_refuses_an_unknown_task_before_running_anything() -> None:
    """A typo in --tasks must fail in one line at once, not after an hour of other cells."""
    command = [sys.executable, str(PEERS_DIR / "table.py"), "--tasks", "tsp_constuct", "--report-only"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "invalid choice: 'tsp_constuct'" in result.stderr and "bpp_online" in result.stderr
    assert result.stdout == ""


def test_the_plot_draws_a_run_that_made_no_evaluation(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """LLM4AD can spend its whole call budget without one parseable answer: its curve is empty."""
    cells = [{**_cell("llm4ad", 0, None), "curve": [None]}, {**_cell("llm4ad", 1, None), "curve": []}]
    cells.append({**_cell("coevo", 0, 4.0), "curve": [6.0, 4.0]})
    figure = _plotted(cells, tmp_path, monkeypatch)
    lines = {line.get_label(): list(line.get_ydata()) for line in figure.axes[0].get_lines()}
    assert lines["coevo (1 seed)"] == [6.0, 4.0]
    assert len(lines["llm4ad (2 seeds)"]) == 1 and math.isnan(lines["llm4ad (2 seeds)"][0])
