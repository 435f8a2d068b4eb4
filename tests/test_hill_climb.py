"""`hill-climb`, a method added as one file: it climbs from the best heuristic, one modification at a
time, keeps a child only if it is strictly better, and resumes exactly. The scripted LLM writes the
heuristics (its coefficient depends on the prompt, so children of one parent differ)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_capture import run_cli

from coevo.candidate import Candidate
from coevo.run.config import ConfigError, RunConfig, validate
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore

BASE = {
    "method": "hill-climb",
    "task": "tsp_construct",
    "model": "scripted_llm:build",
    "budget": 12,
    "library": "none",
    "seed": 0,  # the scripted answers follow the prompt text: at this seed the first sample leaves room to climb
    "population_size": 4,
    "eval": {"limit": 4, "workers": 1},
    "settings": {"batch": 2},
}


def config(**changes) -> RunConfig:
    return validate({**BASE, **changes})


def by_step(run_dir: Path) -> list[list[Candidate]]:
    steps: dict[int, list[Candidate]] = {}
    for step, candidate in RunStore.open(run_dir).candidates():
        steps.setdefault(step, []).append(candidate)
    return [steps[step] for step in sorted(steps)]


@pytest.mark.parametrize("operator", ["m1", "m2"])
def test_each_step_modifies_the_best_so_far_and_keeps_only_a_strictly_better_child(
    tmp_path: Path, operator: str
) -> None:
    with start_run(config(settings={"batch": 2, "operator": operator}), tmp_path) as runner:
        best = runner.run()
    steps = by_step(tmp_path)
    assert [len(children) for children in steps] == [2] * 6, "budget 12: 6 steps of 2 children"
    incumbent, improved = None, 0
    for children in steps:
        if incumbent is None:
            assert all(c.operator == "i1" for c in children), "nothing valid to climb from: fresh samples"
        else:
            assert all(c.operator == operator and c.parents == (incumbent.key,) for c in children)
        better = [c for c in children if c.valid and (incumbent is None or c.fitness > incumbent.fitness)]
        if better:
            improved += incumbent is not None
            incumbent = max(better, key=lambda c: c.fitness)
    assert improved, "a modification beat its parent at least once"
    assert best == incumbent


def test_an_interrupted_climb_resumes_where_an_uninterrupted_one_ends(tmp_path: Path) -> None:
    with start_run(config(), tmp_path / "straight") as runner:
        runner.run()
    with start_run(config(), tmp_path / "cut") as runner:
        for _ in range(3):
            runner.run_step()
    with resume_run(tmp_path / "cut") as runner:
        runner.run()
    assert by_step(tmp_path / "cut") == by_step(tmp_path / "straight")


def test_a_climb_exports_under_its_default_name(tmp_path: Path, capsys) -> None:
    with start_run(config(budget=4), tmp_path / "run") as runner:
        runner.run()
    code, out, err = run_cli(capsys, "runs", "export", str(tmp_path / "run"), "--out", str(tmp_path / "lib"))
    assert code == 0, err
    assert re.fullmatch(r"tsp_construct__hill_climb_s0_[0-9a-f]{8}\.py", Path(out.strip()).name)


def test_its_settings_are_checked_by_its_own_model() -> None:
    with pytest.raises(ConfigError, match="settings.batch"):
        config(settings={"batch": 0})
    with pytest.raises(ConfigError, match="unknown config key 'settings.batch' for method eoh"):
        config(method="eoh")
