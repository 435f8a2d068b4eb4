"""`coevo run | resume | report` and `coevo runs show | export`: the runner's command line.

Each command validates what it was given before loading a model, so mistakes cost a second, not a
model load, and end in one line and exit 2 (raised as `UsageProblem` for `coevo.cli.main`).
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from coevo.progress import progress_bars
from coevo.shown import shown

ExecutorOption = Annotated[
    str, typer.Option("--executor", metavar="local|ray", help="Where members play: this process, or Ray workers.")
]
AddressOption = Annotated[
    str | None, typer.Option("--address", help="Ray cluster to join (default: RAY_ADDRESS, else a local one).")
]


def register(app: typer.Typer, fail) -> None:
    """Add the runner's commands to the `coevo` app; `fail(message)` raises the CLI's usage error."""
    runs_app = typer.Typer(no_args_is_help=True, help="Inspect and export finished or running runs.")
    app.add_typer(runs_app, name="runs")

    @app.command("run")
    def run(
        config_path: Annotated[Path, typer.Argument(metavar="CONFIG.toml", help="Run configuration.")],
        overrides: Annotated[
            list[str] | None, typer.Option("--set", metavar="KEY=VALUE", help="Override a config key (repeatable).")
        ] = None,
        run_dir: Annotated[Path | None, typer.Option(help="Where the run is stored (default: runs/<name>).")] = None,
        executor: ExecutorOption = "local",
        address: AddressOption = None,
    ) -> None:
        """Run a method on a task until the evaluation budget is spent, then validate and report."""
        from coevo.llm.openai_compat import LLMServerError
        from coevo.run.config import ConfigError, load_config
        from coevo.run.runner import SeedHeuristicError
        from coevo.run.session import default_run_dir, start_run
        from coevo.run.store import StoreError

        try:
            config = load_config(config_path, overrides or [])
            target = run_dir or default_run_dir(config)
            if (target / "run.sqlite").exists():
                fail(f"{target} already holds a run; use `coevo resume {target}` or another --run-dir")
            made = _Made(target)
            try:
                runner = start_run(config, target, executor=executor, address=address)
            except BaseException:
                made.remove()
                raise
        except (ConfigError, StoreError) as exc:
            fail(str(exc))
        try:
            _drive(runner)
        except SeedHeuristicError as exc:  # a broken problem: nothing of the run is worth keeping
            made.remove()
            fail(str(exc))
        except LLMServerError as exc:
            if not _answered(target):  # the server never answered: nothing worth keeping
                made.remove()
                fail(f"{exc}; no run was started")
            fail(f"{exc}; {_to_resume(target)} once the server answers")

    @app.command("resume")
    def resume(
        run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")],
        executor: ExecutorOption = "local",
        address: AddressOption = None,
    ) -> None:
        """Continue an interrupted run exactly where its last committed step left it."""
        from coevo.llm.openai_compat import LLMServerError
        from coevo.run.config import ConfigError
        from coevo.run.session import resume_run
        from coevo.run.store import StoreError

        try:
            runner = resume_run(run_dir, executor=executor, address=address)
        except (ConfigError, StoreError) as exc:
            fail(str(exc))
        try:
            _drive(runner)
        except LLMServerError as exc:
            fail(f"{exc}; {_to_resume(run_dir)} once the server answers")

    @app.command("report")
    def report(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")]) -> None:
        """Write RUN_DIR/report.html (the run's curves, code and prompts) and RUN_DIR/lineage.html (its tree)."""
        from coevo.run.report import write_report
        from coevo.run.store import StoreError

        try:
            print(write_report(run_dir))
        except StoreError as exc:
            fail(str(exc))

    @runs_app.command("show")
    def show(
        run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Status, budget used, LLM calls, the best heuristic or held-out success, and the weights hash of a run."""
        from coevo.run.heldout import heldout_lines
        from coevo.run.runner import summary
        from coevo.run.store import RunStore, StoreError
        from coevo.run.validation import answer_line

        try:
            store = RunStore.open(run_dir)
        except StoreError as exc:
            fail(str(exc))
        facts = summary(store)
        if as_json:
            print(json.dumps(facts))
            return
        best = facts["best"]
        print(f"{run_dir}: {facts['status']}, {facts['method']} on {facts['task'] or facts['env']}")
        print(f"  evaluations {facts['evaluations']}, LLM calls {facts['llm_calls']}")
        print(f"  weights sha256 {facts['weights_sha256'] or '(base model, not evolved)'}")
        for line in heldout_lines(facts["heldout"]):
            print(f"  {shown(line)}")
        if best is not None:
            print(f"  {shown(answer_line(best))}\n{shown(best['code'], lines=True)}")
        elif facts["task"] is not None:
            print("  no valid heuristic yet")

    @runs_app.command("export")
    def export(
        run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A finished run directory.")],
        name: Annotated[str | None, typer.Option(help="Library name (default: method, seed and code hash).")] = None,
        to: Annotated[
            Path | None, typer.Option("--out", "--to", help="Directory to write to (default: ./skills).")
        ] = None,
    ) -> None:
        """Add the run's best heuristic to the skill library with its provenance."""
        from coevo.run.export import ExportError, export_best
        from coevo.run.store import StoreError

        try:
            print(export_best(run_dir, name=name, directory=to))
        except (StoreError, ExportError) as exc:
            fail(str(exc))


class _Made:
    """What creating a run directory adds to the file system, so a run that never starts can take it back."""

    def __init__(self, run_dir: Path) -> None:
        missing = [path for path in (run_dir, *run_dir.parents) if not path.exists()]
        self.top = missing[-1] if missing else None
        """The outermost directory that did not exist (removed whole); None: the run directory existed."""
        self.run_dir = run_dir
        self.before = set() if self.top is not None else set(run_dir.iterdir())

    def remove(self) -> None:
        if self.top is not None:
            shutil.rmtree(self.top, ignore_errors=True)
            return
        for path in set(self.run_dir.iterdir()) - self.before:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _answered(run_dir: Path) -> bool:
    """Whether the run holds an LLM call: a run whose server never answered has nothing worth keeping."""
    from coevo.run.store import RunStore

    store = RunStore.open(run_dir)
    try:
        return store.llm_totals()["calls"] > 0
    finally:
        store.close()


def _to_resume(run_dir: Path) -> str:
    return f"`coevo resume {run_dir}` continues the run from its last committed step"


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: the run stops after its last committed step."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


def _drive(runner) -> None:
    """Run with a progress bar, then validate the best heuristic, write the report, and summarise.
    Ctrl-C or SIGTERM ends it with the command that continues it (exit 130, or 143 for SIGTERM)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        _drive_until_done(runner)
    except KeyboardInterrupt as stop:
        print(f"coevo: interrupted; {_to_resume(runner.run_dir)}", file=sys.stderr)
        raise typer.Exit(143 if isinstance(stop, _Terminated) else 130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _drive_until_done(runner) -> None:
    from coevo.run.report import write_report
    from coevo.run.validation import answer_line

    console = Console(stderr=True)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("evals  best on search {task.fields[best]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with runner:
        with progress_bars(*columns, console=console) as progress:
            bar = progress.add_task(_describe(runner), total=runner.config.budget, best="-")

            def update(current) -> None:
                best = "-" if current.best is None else f"{current.best.objective:.5g}"
                progress.update(bar, completed=current.evaluations, description=_describe(current), best=best)

            runner.on_progress = update
            update(runner)
            runner.run()
        with runner.store.running():  # finished once the answer is measured: a stop before that is not
            lines = _held_out(runner, console)
        answer = runner.store.answer_summary()
    if answer is not None:
        lines.insert(0, answer_line(answer))
    report = write_report(runner.run_dir)
    for line in lines:
        print(shown(line))  # a validation line may quote a candidate's reason
    print(f"run directory: {runner.run_dir}")
    print(f"report: {report}")


def _held_out(runner, console: Console) -> list[str]:
    """The held-out verdict: the best heuristic against the seed (AHD), or success before and after (agent)."""
    if runner.family.writes_code:
        from coevo.run.validation import validate_best

        with console.status("validating the best heuristic and the seed on the val split"):
            return validate_best(runner).lines()
    from coevo.run.heldout import heldout_lines

    with console.status(f"measuring the trained weights on the {runner.workload.heldout} split"):
        runner.record_heldout("after")
    return heldout_lines(runner.heldout)


def _describe(runner) -> str:
    return f"{runner.config.method} {runner.config.subject} gen {runner.generation}"
