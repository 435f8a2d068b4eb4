"""`coevo tune`: Optuna studies over scripted-LLM runs (search space, base weights, pruning, workers, resume)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from cli_capture import run_cli
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from scripted_llm import ScriptedLLM
from test_agent_es import CONFIG as AGENT_CONFIG

from coevo.es.hosts import module_host
from coevo.run.config import load_config
from coevo.run.store import RunStore
from coevo.tune.space import load_space
from coevo.tune.study import StudySetup, open_study, run_study

BASE = """
method = "coevo"
task = "tsp_construct"
model = "scripted_llm:build"
budget = 12
seed = 1
population_size = 4
[eval]
limit = 3
workers = 1
[es]
sigma = 0.05
alpha = 0.05
antithetic = false  # the scripted LLM ignores the weights: a mirrored pair answers alike and ES rightly stays put
"""

TUNE = """
[tune]
"es.sigma" = {low = 1e-3, high = 1e-1, log = true}
population_size = {choices = [4, 8]}
"""

TESTS = str(Path(__file__).parent)


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def write_config(tmp_path: Path, tune: str = TUNE, base: str = BASE) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(base + tune)
    return path


def setup_for(tmp_path: Path, tune: str = TUNE, storage: str | None = None, **changes) -> StudySetup:
    directory = tmp_path / "study"
    storage = storage or f"journal:{directory / 'j.log'}"
    return StudySetup(
        load_space(write_config(tmp_path, tune)), directory, storage, "s", **{"pruner": "none", **changes}
    )


def cli_study(directory: Path) -> optuna.Study:
    """The study `coevo tune --dir DIRECTORY` keeps in its default journal."""
    storage = JournalStorage(JournalFileBackend(str(directory / "journal.log")))
    return optuna.load_study(study_name="study", storage=storage)


def stored_evaluations(run_dir: str) -> int:
    store = RunStore.open(Path(run_dir))
    try:
        return (store.last_state() or {}).get("evaluations", 0)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("tune", "message"),
    [
        ('[tune]\n"es.sigmaa" = {low = 0.1, high = 1.0}\n', 'tune."es.sigmaa": no field sigmaa in [es] (ESSettings)'),
        ("[tune]\nsigma = {low = 0.1, high = 1.0}\n", "tune.sigma: no field sigma in the run config (RunConfig)"),
        ('[tune]\n"es.sigma" = {low = 1e-2, high = 1e-3}\n', 'tune."es.sigma": needs numbers low < high'),
        ('[tune]\n"es.alpha" = {low = 0, high = 1e-3, log = true}\n', "a log range needs low > 0"),
        ("[tune]\npopulation_size = {low = 1, high = 8}\n", "tune.population_size = 1: config key 'population_size'"),
        ('[tune]\n"es.shaping" = {choices = ["zscore", "rank"]}\n', 'tune."es.shaping" = rank:'),
        ('[tune]\n"settings.operators" = {choices = [["m1"], ["x9"]]}\n', 'tune."settings.operators" = x9:'),
        ('[tune]\n"es.sigma" = {choices = []}\n', "choices must be a non-empty list"),
        ('[tune]\n"es.sigma" = {low = 1e-3, high = 1e-2, spread = 2}\n', "a range takes low, high"),
        ('[tune]\n"es.scope" = {low = 1, high = 2}\n', 'tune."es.scope" is not an int or float key'),
        ('[tune]\n"settings.prompt_pool" = {low = 1, high = 2.5}\n', 'tune."settings.prompt_pool" is a whole number'),
        ("", "has no [tune] table"),
    ],
)
def test_bad_tune_tables_fail_with_one_line(tmp_path: Path, capsys, tune: str, message: str) -> None:
    code, out, err = run_cli(
        capsys, "tune", str(write_config(tmp_path, tune)), "--trials", "2", "--dir", str(tmp_path / "d")
    )
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "d" / "trials").exists()


def test_a_four_trial_study_runs_each_trial_from_the_base_weights_and_exports_the_best(tmp_path: Path, capsys) -> None:
    directory = tmp_path / "study"
    code, out, err = run_cli(
        capsys, "tune", str(write_config(tmp_path)), "--trials", "4", "--dir", str(directory), "--pruner", "none"
    )
    assert code == 0, err
    study = cli_study(directory)
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert sorted({t.user_attrs["run_dir"] for t in trials}) == [
        str(directory / "trials" / f"{n:04d}") for n in range(4)
    ]
    assert all(stored_evaluations(t.user_attrs["run_dir"]) == 12 for t in trials)

    base_hash = module_host(ScriptedLLM().model, "full").weights_sha256()
    assert [t.user_attrs["start_weights_sha256"] for t in trials] == [base_hash] * 4
    assert all(t.user_attrs["end_weights_sha256"] != base_hash for t in trials), "each trial evolved the weights"

    best = max(trials, key=lambda t: t.value)
    assert study.best_trial.number == best.number
    exported = load_config(directory / "best.toml")
    assert exported.es.sigma == best.params["es.sigma"] and exported.population_size == best.params["population_size"]
    assert exported.budget == 12 and exported.eval.limit == 3
    store = RunStore.open(Path(best.user_attrs["run_dir"]))
    answer, _ = store.answer()
    assert (directory / "best.py").read_text() == answer.code
    assert json.loads((directory / "best.json").read_text())["trial"] == best.number
    assert "optuna-dashboard" in out and "4 complete" in out


AGENT = (
    AGENT_CONFIG.replace("budget = 8", "budget = 4")
    .replace('env = "gridnav"', 'env = "gridnav-dense"')
    .replace("episodes = 4", "episodes = 2")
    .replace("heldout_episodes = 6", "heldout_episodes = 3")
)


def test_a_study_on_episodes_is_worth_held_out_success_and_tunes_the_episodes(tmp_path: Path, capsys) -> None:
    tune = '[tune]\n"es.alpha" = {low = 1e-2, high = 1e-1, log = true}\n"workload.episodes" = {choices = [1, 2]}\n'
    directory = tmp_path / "study"
    code, out, err = run_cli(
        capsys,
        "tune",
        str(write_config(tmp_path, tune, AGENT)),
        "--trials",
        "2",
        "--dir",
        str(directory),
        "--pruner",
        "none",
    )
    assert code == 0, err
    trials = cli_study(directory).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for trial in trials:
        store = RunStore.open(Path(trial.user_attrs["run_dir"]))
        heldout = json.loads(store.meta("heldout"))
        store.close()
        after = heldout["after"]
        assert trial.value == after["successes"] / after["episodes"] and after["episodes"] == 3
        assert trial.user_attrs["heldout_after"] == f"{after['successes']}/3"
        assert trial.user_attrs["heldout_before"] == f"{heldout['before']['successes']}/3"
        assert trial.user_attrs["end_weights_sha256"] != trial.user_attrs["start_weights_sha256"]
    assert load_config(directory / "best.toml").workload.episodes in (1, 2)


def test_a_crashing_trial_is_recorded_failed_and_the_study_goes_on(tmp_path: Path) -> None:
    setup = setup_for(tmp_path, '[tune]\n"es.scope" = {choices = ["full", "^no_such_parameter$"]}\n')
    study = open_study(setup)
    for scope in ("full", "^no_such_parameter$", "full"):
        study.enqueue_trial({"es.scope": scope})
    study = run_study(setup, trials=3)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert "no_such_parameter" in study.trials[1].user_attrs["error"]


def test_resuming_a_study_continues_it(tmp_path: Path) -> None:
    setup = setup_for(tmp_path, storage=f"sqlite:///{tmp_path / 'study.db'}")
    first = run_study(setup, trials=2)
    before = [(t.number, t.params, t.value) for t in first.trials]
    resumed = run_study(setup, trials=3)
    assert [(t.number, t.params, t.value) for t in resumed.trials[:2]] == before
    assert len(resumed.trials) == 3 and resumed.trials[2].state == TrialState.COMPLETE
    assert resumed.trials[2].user_attrs["run_dir"].endswith("0002")


def test_two_worker_processes_share_one_journal_without_losing_trials(tmp_path: Path) -> None:
    directory = tmp_path / "study"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "coevo.cli", "tune", str(write_config(tmp_path)), "--trials", "4"]
    command += ["--dir", str(directory), "--jobs", "2", "--pruner", "none"]
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    study = cli_study(directory)
    trials = study.trials
    # each worker checks the count before asking, so both may ask for the last one: 4 or 5 trials
    assert len(trials) in (4, 5) and [t.number for t in trials] == list(range(len(trials)))
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert all(stored_evaluations(t.user_attrs["run_dir"]) == 12 for t in trials)
    assert len({t.user_attrs["run_dir"] for t in trials}) == len(trials)


PRUNING_BASE = (
    BASE.replace('method = "coevo"', 'method = "sample+es"')
    .replace("budget = 12", "budget = 24")
    .replace("[eval]", 'library = "none"\n[settings]\nbatch = 6\n[eval]')
)


def test_median_pruning_stops_a_trial_that_falls_behind(tmp_path: Path) -> None:
    """sigma = 10 turns the scripted LLM's members into poor or broken heuristics from generation 1 on."""
    path = tmp_path / "prune.toml"
    path.write_text(PRUNING_BASE + '[tune]\n"es.sigma" = {low = 1e-4, high = 10.0, log = true}\n')
    directory = tmp_path / "study"
    setup = StudySetup(load_space(path), directory, f"journal:{directory / 'j.log'}", "s", "median", startup_trials=2)
    study = open_study(setup)
    for sigma in (1e-3, 2e-3, 10.0):
        study.enqueue_trial({"es.sigma": sigma})
    study = run_study(setup, trials=3)
    good, _, bad = study.trials
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED]
    assert max(bad.intermediate_values) < max(good.intermediate_values)
    assert stored_evaluations(bad.user_attrs["run_dir"]) < 24, "the pruned run stopped before its budget"
    assert RunStore.open(Path(bad.user_attrs["run_dir"])).meta("status") == "pruned"


def test_a_trial_left_running_by_a_killed_invocation_is_recorded_failed_on_resume(tmp_path: Path) -> None:
    setup = setup_for(tmp_path)
    open_study(setup).ask()  # a worker that died mid-trial
    study = run_study(setup, trials=2)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.COMPLETE]


def test_wilcoxon_pruning_pairs_instances_with_the_best_trial(tmp_path: Path) -> None:
    pytest.importorskip("scipy", reason="the Wilcoxon pruner needs scipy")
    path = tmp_path / "prune.toml"
    path.write_text(
        PRUNING_BASE.replace("limit = 3", "limit = 8") + '[tune]\n"es.sigma" = {low = 1e-4, high = 10.0, log = true}\n'
    )
    directory = tmp_path / "study"
    setup = StudySetup(load_space(path), directory, f"journal:{directory / 'j.log'}", "s", "wilcoxon")
    study = open_study(setup)
    for sigma in (1e-3, 10.0):
        study.enqueue_trial({"es.sigma": sigma})
    study = run_study(setup, trials=2)
    good, bad = study.trials
    assert [good.state, bad.state] == [TrialState.COMPLETE, TrialState.PRUNED]
    assert len(good.intermediate_values) % 8 == 0 and len(good.intermediate_values) > len(bad.intermediate_values)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--storage", "redis://host/0"], "--storage must be journal:PATH or sqlite:///PATH"),
        (["--pruner", "hyper"], "unknown pruner 'hyper'"),
    ],
)
def test_bad_tune_options_fail_with_one_line(tmp_path: Path, capsys, option: list[str], message: str) -> None:
    code, _, err = run_cli(
        capsys, "tune", str(write_config(tmp_path)), "--trials", "1", "--dir", str(tmp_path / "d"), *option
    )
    assert code == 2 and message in err and err.count("\n") == 1, err
