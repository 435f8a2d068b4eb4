"""experiments/grid.py on a tiny grid with the scripted LLM: tables, comparisons and restarts."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path

import pytest

from coevo.run.session import start_run
from coevo.run.store import RunStore

GRID_SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "grid.py"
SPEC = importlib.util.spec_from_file_location("experiments_grid", GRID_SCRIPT)
grid = sys.modules.setdefault(SPEC.name, importlib.util.module_from_spec(SPEC))  # dataclasses look it up
SPEC.loader.exec_module(grid)

ARGS = [
    "--tasks", "tsp_construct", "--methods", "eoh", "eoh+es", "--budgets", "40", "--seeds", "0", "1",
    "--scale", "0.5", "--model", "scripted_llm:build", "--eval-limit", "4",
]  # fmt: skip


@pytest.fixture(scope="module")
def finished_grid(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("grid")
    assert grid.main([*ARGS, "--out", str(out)]) == 0
    return out


def test_grid_tabulates_every_cell_from_its_runs(finished_grid: Path) -> None:
    table = json.loads((finished_grid / "grid.json").read_text())
    runs = table["runs"]
    assert sorted((r["method"], r["seed"]) for r in runs) == [("eoh", 0), ("eoh", 1), ("eoh+es", 0), ("eoh+es", 1)]
    assert all(r["status"] == "finished" and r["evaluations"] == 20 and r["outcome"] == "ran" for r in runs)
    assert {(c["task"], c["budget"], c["method"]) for c in table["cells"]} == {
        ("tsp_construct", 40, "eoh"),
        ("tsp_construct", 40, "eoh+es"),
    }
    for cell in table["cells"]:
        objectives = [r["objective"] for r in runs if r["method"] == cell["method"]]
        assert cell["runs"] == cell["valid_runs"] == 2
        assert cell["objective_mean"] == pytest.approx(sum(objectives) / 2)
        assert cell["objective_std"] == pytest.approx(abs(objectives[0] - objectives[1]) / math.sqrt(2))


def test_grid_compares_matched_methods_with_a_paired_test(finished_grid: Path) -> None:
    table = json.loads((finished_grid / "grid.json").read_text())
    [comparison] = table["comparisons"]  # coevo and the sample methods are not in this grid
    assert (comparison["treatment"], comparison["baseline"]) == ("eoh+es", "eoh")
    assert comparison["wins"] + comparison["ties"] + comparison["losses"] == comparison["settings"] == 2
    assert 0.0 <= comparison["p_value"] <= 1.0
    markdown = (finished_grid / "grid.md").read_text()
    assert "| task | budget | evals | eoh | eoh+es |" in markdown
    assert f"eoh+es vs eoh: better in {comparison['wins']} of 2 settings" in markdown


def test_restart_skips_finished_runs_and_resumes_unfinished_ones(finished_grid: Path, tmp_path: Path) -> None:
    out = tmp_path / "grid"
    for run_dir in (finished_grid / "runs").glob("*/*/*"):  # three finished runs, one to be redone
        if run_dir.parent.name != "eoh_es" or run_dir.name != "b40-s1":
            shutil.copytree(run_dir, out / run_dir.relative_to(finished_grid))
    unfinished = grid.Setting("tsp_construct", "eoh+es", 40, 1)
    config = grid.build_config(unfinished, grid.CONFIGS, 0.5, grid.overrides(grid.parse_args(ARGS)))
    with start_run(config, unfinished.run_dir(out)) as runner:
        runner.run_step()  # the initial population only: 5 of 20 evaluations

    assert grid.main([*ARGS, "--out", str(out)]) == 0
    outcomes = {(r["method"], r["seed"]): r["outcome"] for r in json.loads((out / "grid.json").read_text())["runs"]}
    assert outcomes == {
        ("eoh", 0): "skipped",
        ("eoh", 1): "skipped",
        ("eoh+es", 0): "skipped",
        ("eoh+es", 1): "resumed",
    }
    store = RunStore.open(unfinished.run_dir(out))
    assert (store.meta("status"), store.last_state()["evaluations"]) == ("finished", 20)
    store.close()


def test_a_run_stored_before_a_config_key_existed_is_still_the_same_run(finished_grid: Path, tmp_path: Path) -> None:
    """Grids span sessions while coevo gains settings: a store without a newer key reads it at its default."""
    import sqlite3

    setting = grid.Setting("tsp_construct", "eoh", 40, 0)
    run_dir = tmp_path / "run"
    shutil.copytree(setting.run_dir(finished_grid), run_dir)
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        db.execute("UPDATE meta SET value = json_remove(value, '$.novelty', '$.es.strategy') WHERE key = 'config'")
    db.close()
    config = grid.build_config(setting, grid.CONFIGS, 0.5, grid.overrides(grid.parse_args(ARGS)))
    assert grid.run_state(run_dir, config) == "finished"
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        db.execute("UPDATE meta SET value = json_set(value, '$.es.alpha', 0.123) WHERE key = 'config'")
    db.close()
    with pytest.raises(grid.GridError, match="another config"):
        grid.run_state(run_dir, config)


def test_a_run_dir_with_another_config_stops_the_grid(finished_grid: Path, capsys) -> None:
    assert grid.main([*ARGS, "--eval-limit", "3", "--out", str(finished_grid)]) == 2
    assert "holds a run with another config" in capsys.readouterr().err


def test_set_overrides_reach_every_run_after_scaling() -> None:
    options = grid.parse_args([*ARGS, "--set", "llm.max_new_tokens=64", "--set", "es.alpha=0.01"])
    config = grid.build_config(
        grid.Setting("tsp_construct", "eoh+es", 40, 3), grid.CONFIGS, 0.5, grid.overrides(options)
    )
    assert (config.budget, config.population_size, config.seed) == (20, 4, 3), "population: even, for mirrored pairs"
    assert (config.model, config.eval.limit) == ("scripted_llm:build", 4)
    assert (config.llm.max_new_tokens, config.es.alpha) == (64, 0.01)


def test_coevo_pool_follows_a_population_set_on_the_command_line() -> None:
    """The bpp_online grid's command sets population_size=4: coevo's 2 mirrored pairs get a pool of 2
    (the config's 5 would make the run refuse its population); a pool set explicitly is kept."""
    setting = grid.Setting("bpp_online", "coevo", 168, 0)
    config = grid.build_config(setting, grid.CONFIGS, 1.0, ["population_size=4"])
    assert (config.population_size, config.settings["prompt_pool"]) == (4, 2)
    kept = grid.build_config(setting, grid.CONFIGS, 1.0, ["population_size=4", "settings.prompt_pool=1"])
    assert kept.settings["prompt_pool"] == 1


def run_result(task: str, objective: float | None) -> object:
    return grid.RunResult(task, "eoh", 40, 0, 20, "finished", objective, None, "", "ran")


@pytest.mark.parametrize(
    ("task", "treatment", "baseline", "expected"),
    [
        ("tsp_construct", 9.0, 10.0, 10.0),  # shorter tours are better
        ("kp_construct", 9.0, 10.0, -10.0),  # larger knapsack values are better
        ("tsp_construct", None, 10.0, -math.inf),  # no valid heuristic loses to any valid one
        ("tsp_construct", None, None, 0.0),
    ],
)
def test_improvement_follows_the_task_sense(task, treatment, baseline, expected) -> None:
    assert grid.improvement(run_result(task, treatment), run_result(task, baseline)) == pytest.approx(expected)
