"""A tuning study: Optuna ask/tell over coevo runs, one run directory (and store) per trial.

Every trial starts from the base weights: a worker loads the backend once, keeps a copy of its
module's weights, and puts them back before each trial, since the ES host snapshots whatever weights
the module holds. Trials report the best search fitness (higher is better) after every generation,
so a pruner can stop a poor trial early; a trial that plays episodes is worth its held-out success. Workers are processes sharing one storage (a journal file
by default, which Optuna recommends over SQLite for parallel writers); a trial that crashes is
recorded failed and the study goes on.
"""

from __future__ import annotations

import json
import multiprocessing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from coevo.candidate import fitness_of
from coevo.extras import install_hint
from coevo.progress import progress_bars
from coevo.run.config import ConfigError, validate
from coevo.run.runner import Runner
from coevo.run.session import load_llm, start_run
from coevo.run.store import RunStore
from coevo.tune.space import TuneSpace

PRUNERS = ("median", "wilcoxon", "none")
COUNTED = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
"""Trials that count towards `--trials`; enqueued (waiting) ones do not until they start."""


@dataclass(frozen=True)
class StudySetup:
    """Everything a worker process needs to join the study (picklable)."""

    space: TuneSpace
    directory: Path
    storage: str
    name: str
    pruner: str = "median"
    startup_trials: int = 3


def open_study(setup: StudySetup) -> optuna.Study:
    """The study in the setup's storage, created on first use (maximising search fitness)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the workers print one line per trial instead
    return optuna.create_study(
        storage=_storage(setup.storage),
        study_name=setup.name,
        direction="maximize",
        load_if_exists=True,
        pruner=_pruner(setup.pruner, setup.startup_trials),
    )


def run_study(setup: StudySetup, trials: int, jobs: int = 1) -> optuna.Study:
    """Run the study until it holds `trials` trials, with `jobs` worker processes, then export the best."""
    study = open_study(setup)
    for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(stale.number, state=TrialState.FAIL)  # left by a killed invocation: it never finishes
    if jobs == 1:
        work(setup, trials)
    else:
        context = multiprocessing.get_context("spawn")
        workers = [context.Process(target=work, args=(setup, trials)) for _ in range(jobs)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    study = open_study(setup)
    export_best(setup, study)
    return study


def work(setup: StudySetup, trials: int) -> None:
    """One worker: ask for trials until the study holds `trials` of them (all workers count together)."""
    study = open_study(setup)
    base_config = validate(setup.space.base)  # no knob changes the model or the budget
    llm = load_llm(base_config)
    base = BaseWeights(llm)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with progress_bars(*columns, console=Console()) as bars:
        while len(study.get_trials(deepcopy=False, states=COUNTED)) < trials:
            trial = study.ask()
            bar = bars.add_task(f"trial {trial.number} evals", total=base_config.budget)
            state, value = run_trial(setup, trial, llm, base, lambda r: bars.update(bar, completed=r.evaluations))
            bars.remove_task(bar)
            study.tell(trial, value, state=state)
            shown = "" if value is None else f" value {value:.6g}"
            bars.console.print(f"trial {trial.number}: {state.name.lower()}{shown} {trial.params}")


def run_trial(
    setup: StudySetup, trial: optuna.Trial, llm, base: BaseWeights, on_progress: Callable[[Runner], None] | None = None
) -> tuple[TrialState, float | None]:
    """Run one trial's coevo run from the base weights; its state and value for `study.tell`."""
    run_dir = setup.directory / "trials" / f"{trial.number:04d}"
    trial.set_user_attr("run_dir", str(run_dir))
    try:
        config = setup.space.suggest(trial)
        base.reset()
        with start_run(config, run_dir, llm) as runner:
            trial.set_user_attr("start_weights_sha256", runner.weights_sha256())
            runner.on_generation = _reporter(trial, setup.pruner == "wilcoxon")
            runner.on_progress = on_progress
            best = runner.run()
            trial.set_user_attr("end_weights_sha256", runner.weights_sha256())
            if not runner.family.writes_code:
                return TrialState.COMPLETE, heldout_value(runner, trial)
    except optuna.TrialPruned:
        return TrialState.PRUNED, None
    except Exception as exc:  # a crashing trial is recorded, and the study goes on
        trial.set_user_attr("error", f"{type(exc).__name__}: {exc}"[:500])
        return TrialState.FAIL, None
    if best is None:
        trial.set_user_attr("error", "no valid heuristic")
        return TrialState.FAIL, None
    return TrialState.COMPLETE, best.fitness


def heldout_value(runner: Runner, trial: optuna.Trial) -> float:
    """A trial on episodes is worth the trained weights' held-out success (its search rewards are on
    episodes it trained on); both measurements are kept on the trial, so a study shows what each changed."""
    after = runner.record_heldout("after")
    for when, figure in runner.heldout.items():
        if when in ("before", "after"):
            trial.set_user_attr(f"heldout_{when}", f"{figure['successes']}/{figure['episodes']}")
    return after.rate


class BaseWeights:
    """A copy of the backend's module weights as loaded, to put back before every trial."""

    def __init__(self, llm) -> None:
        model = getattr(llm, "model", None)
        self.model = model
        self.saved = None if model is None else {k: v.detach().clone() for k, v in model.state_dict().items()}

    def reset(self) -> None:
        if self.model is not None:
            self.model.load_state_dict(self.saved)


def export_best(setup: StudySetup, study: optuna.Study) -> Path | None:
    """Write the best trial's config (best.toml, without [tune]) and answer (best.py, best.json)."""
    try:
        best = study.best_trial
    except ValueError:
        return None
    store = RunStore.open(Path(best.user_attrs["run_dir"]))
    try:
        answer, split = store.answer()
    finally:
        store.close()
    config_path = setup.directory / "best.toml"
    config_path.write_text(to_toml(setup.space.from_params(best.params)), encoding="utf-8")
    if answer is not None:
        (setup.directory / "best.py").write_text(answer.code, encoding="utf-8")
    facts = {"trial": best.number, "value": best.value, "params": best.params, "run_dir": best.user_attrs["run_dir"]}
    facts["answer"] = None if answer is None else {"split": split, "objective": answer.objective, "key": answer.key}
    (setup.directory / "best.json").write_text(json.dumps(facts, indent=2), encoding="utf-8")
    return config_path


def to_toml(data: dict[str, Any]) -> str:
    """TOML for config data (scalars, lists, tables; a table within a table inline), as `coevo run` reads it."""
    top = [f"{key} = {_toml_value(value)}" for key, value in data.items() if not isinstance(value, dict)]
    tables = [
        f"\n[{key}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in value.items())
        for key, value in data.items()
        if isinstance(value, dict)
    ]
    return "\n".join(top) + "\n" + "".join(tables)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _reporter(trial: optuna.Trial, per_instance: bool):
    """The runner's `on_generation` hook: report, then stop the run if the pruner says so.

    The median pruner gets the best search fitness per generation (step = generation). The Wilcoxon
    pruner gets the best candidate's per-instance rewards, step = generation x instances + instance,
    so it pairs the same instance at the same generation with the best trial's.
    """

    def report(current: Runner) -> None:
        if current.best is None:
            return
        generation = current.generation - 1
        if per_instance:
            scores = current.store.per_instance(current.best.key)
            for index, score in enumerate(scores):
                trial.report(fitness_of(score, current.workload.sense), generation * len(scores) + index)
        else:
            trial.report(current.best.fitness, generation)
        if trial.should_prune():
            current.store.set_meta("status", "pruned")  # between steps: `coevo runs show` says why it stopped
            raise optuna.TrialPruned(f"pruned after generation {generation}")

    return report


def _storage(spec: str):
    if spec.startswith("journal:"):
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        path = Path(spec.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if spec.startswith("sqlite:///"):
        return spec
    raise ConfigError(f"--storage must be journal:PATH or sqlite:///PATH, got {spec!r}")


def _pruner(name: str, startup_trials: int) -> optuna.pruners.BasePruner:
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials)
    if name == "wilcoxon":
        try:
            import scipy  # noqa: F401  (the pruner's test)
        except ImportError:
            raise ConfigError(f"--pruner wilcoxon needs scipy: {install_hint('tune')}") from None
        with warnings.catch_warnings():  # experimental in Optuna, and chosen on purpose here
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.pruners.WilcoxonPruner(p_threshold=0.1)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ConfigError(f"unknown pruner {name!r}; known: {', '.join(PRUNERS)}")
