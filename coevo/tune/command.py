"""`coevo tune CONFIG --trials N`: the tuner's command line; bad input ends in one line and exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer, fail) -> None:
    """Add `coevo tune` to the app; `fail(message)` raises the CLI's usage error."""

    @app.command("tune")
    def tune(
        config_path: Annotated[Path, typer.Argument(metavar="CONFIG.toml", help="Run config with a [tune] table.")],
        trials: Annotated[int, typer.Option(min=1, help="Trials the study holds when done (resuming counts old ones).")],
        storage: Annotated[
            str | None, typer.Option(help="journal:PATH or sqlite:///PATH (default: journal in the study directory).")
        ] = None,
        study: Annotated[str | None, typer.Option(help="Study name (default: the config file's stem).")] = None,
        directory: Annotated[
            Path | None, typer.Option("--dir", help="Where trial runs and best.* go (default: tunes/<study>).")
        ] = None,
        jobs: Annotated[int, typer.Option(min=1, help="Worker processes sharing the storage.")] = 1,
        pruner: Annotated[str, typer.Option(help="median, wilcoxon (needs scipy) or none.")] = "median",
        startup_trials: Annotated[
            int, typer.Option(min=0, help="Median pruner: trials that finish before any is pruned.")
        ] = 3,
    ) -> None:
        """Search the [tune] knobs of a config with Optuna, one coevo run per trial, and export the best."""
        from coevo.run.config import ConfigError
        from coevo.tune.space import load_space
        from coevo.tune.study import StudySetup, open_study, run_study

        name = study or config_path.stem
        target = directory or Path("tunes") / name
        try:
            space = load_space(config_path)
            setup = StudySetup(space, target, storage or f"journal:{target / 'journal.log'}", name, pruner, startup_trials)
            open_study(setup)
        except ConfigError as exc:
            fail(str(exc))
        result = run_study(setup, trials, jobs)
        states = [t.state.name.lower() for t in result.trials]
        print(f"study {name}: " + ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states))))
        if (target / "best.toml").exists():
            print(f"best trial {result.best_trial.number} (value {result.best_value:.6g}): {target / 'best.toml'}")
        print(f"dashboard: optuna-dashboard {setup.storage.removeprefix('journal:')}")
