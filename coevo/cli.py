"""The `coevo` command line. Every failure a user can cause ends in one line on stderr and exit 2."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from coevo.llm.models import register as register_models
from coevo.llm.serve import register as register_serve
from coevo.plugins_cli import register as register_plugins
from coevo.run.commands import register as register_runner
from coevo.scaffold import register as register_new
from coevo.shown import shown
from coevo.skills_cli import register as register_skills
from coevo.threads import configure_threads
from coevo.tune.command import register as register_tune

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="coevo: co-evolve prompts, skills and weights of an LLM.",
)
tasks_app = typer.Typer(no_args_is_help=True, help="List the heuristic-design tasks and evaluate heuristics on them.")
app.add_typer(tasks_app, name="tasks")


class UsageProblem(Exception):
    """A mistake in how coevo was called: reported as one line, exit 2."""


def _fail(message: str) -> NoReturn:
    raise UsageProblem(message)


@app.callback()
def common_options(
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Say on stderr how many threads torch computes with, and why.")
    ] = False,
) -> None:
    """Options of every command."""
    threads_log = logging.getLogger("coevo.threads")
    if verbose and not threads_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("coevo: %(message)s"))
        threads_log.addHandler(handler)
        threads_log.setLevel(logging.INFO)
    configure_threads()  # before any torch work: a busy machine's cores are not fought over


register_runner(app, _fail)
register_skills(app, _fail)
register_tune(app, _fail)
register_new(app, _fail)
register_models(app)
register_serve(app)
register_plugins(app)


@tasks_app.command("list")
def tasks_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """One row per heuristic-design task and per agent environment (with its horizon knob H)."""
    from tasks import SPLITS, TASK_NAMES, get_task
    from tasks.agents import ENV_NAMES, env_class

    rows = []
    for name in TASK_NAMES:
        task = get_task(name)
        rows.append(
            {
                "name": name,
                "kind": "heuristic",
                "signature": task.signature,
                "splits": list(SPLITS),
                "reference": task.reference_name,
            }
        )
    for name in ENV_NAMES:
        env = env_class(name)
        horizons = list(env.horizons) if env.horizon_knob else []
        knob = f"H in {{{', '.join(map(str, horizons))}}}: " if horizons else ""
        rows.append(
            {
                "name": name,
                "kind": "agent",
                "signature": env.action_format,
                "splits": list(SPLITS),
                "horizon": horizons,
                "reference": knob + env.horizon_meaning,
                "description": env.description,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="coevo tasks")
    for column in ("name", "kind", "signature / action", "splits", "reference / horizon"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], row["kind"], row["signature"], ", ".join(row["splits"]), row["reference"])
    Console().print(table)


@tasks_app.command("eval")
def tasks_eval(
    task_name: Annotated[
        str, typer.Argument(metavar="TASK", help="Task or agent environment (see `coevo tasks list`).")
    ],
    file: Annotated[
        Path | None, typer.Argument(metavar="[FILE.py]", help="Heuristic tasks: the file defining the function.")
    ] = None,
    split: Annotated[str, typer.Option(help="Instance split: search, val or test.")] = "val",
    limit: Annotated[int | None, typer.Option(min=1, help="Evaluate only the first N instances.")] = None,
    model: Annotated[str, typer.Option(help="Agent environments: the policy model.")] = "smollm2-135m",
    episodes: Annotated[
        int | None, typer.Option(min=1, help="Agent environments: the first N seeds of the split.")
    ] = None,
    horizon: Annotated[int | None, typer.Option(help="Agent environments: H (default: the shortest).")] = None,
    seed: Annotated[int, typer.Option(help="Agent environments: the sampling seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Heuristic task: evaluate FILE.py in the sandbox. Agent environment: roll out --episodes episodes
    of the split with the model and print the success rate with its 95% interval. Exits 0 either way."""
    from tasks import SPLITS

    if split not in SPLITS:
        _fail(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    if _is_environment(task_name):
        if file is not None:
            _fail(f"{task_name} is an agent environment: it takes no FILE.py (see --model, --episodes)")
        _eval_agent(task_name, split, model, episodes, horizon, seed, as_json)
        return
    if file is None:
        _fail(f"{task_name} is a heuristic task: give the FILE.py that defines its function")
    if not file.is_file():
        _fail(f"heuristic file not found: {file}")
    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"cannot read {file}: {exc}")

    from tasks import UnknownTaskError
    from tasks.checked import checked_task

    try:
        task = checked_task(task_name, [split])
    except UnknownTaskError as exc:
        _fail(str(exc))

    from coevo.evaluate import Evaluator  # heavy: only after the arguments are known to be good

    with Evaluator(task, split, limit=limit) as evaluator:
        result = evaluator.evaluate(task.candidate_code(code))
    if as_json:
        print(json.dumps(result.to_json()))
        return
    verdict = "valid" if result.valid else f"INVALID: {shown(result.reason or '')}"
    gap = "n/a" if result.gap_pct is None else f"{result.gap_pct:.3f}%"
    objective = "n/a" if result.objective is None else f"{result.objective:.6g}"
    print(
        f"{task_name} [{split}, {result.n_instances} instances] {verdict}; "
        f"objective {objective}; gap {gap}; {result.seconds:.2f} s"
    )


def _is_environment(name: str) -> bool:
    """Whether `name` (registered, or a file/module spec) is an agent environment rather than a
    heuristic-design task; exits 2 with one line when it is neither."""
    from coevo.plugins import is_spec, names_folder
    from tasks import TASK_NAMES, UnknownTaskError, task_class
    from tasks.agents import ENV_NAMES, UnknownEnvError, env_class

    if name in ENV_NAMES or name in TASK_NAMES:
        return name in ENV_NAMES
    if not is_spec(name) and not names_folder(name):
        _fail(f"unknown task {name!r}; known tasks: {', '.join(TASK_NAMES)}; environments: {', '.join(ENV_NAMES)}")
    try:
        task_class(name)
        return False
    except UnknownTaskError as not_a_task:
        try:
            env_class(name)
        except UnknownEnvError:
            _fail(str(not_a_task))
        return True


def _eval_agent(
    name: str, split: str, model: str, episodes: int | None, horizon: int | None, seed: int, as_json: bool
) -> None:
    """Roll out the first `episodes` seeds of a split with `model` under the reference's agent sampling."""
    import time

    from coevo.stats import wilson_interval
    from tasks.agents import HorizonError, make_env, rollout
    from tasks.agents.splits import ManifestMismatch, verify_split

    try:
        env = make_env(name, horizon)
        seeds = verify_split(name, split, env.horizon)
    except (HorizonError, ManifestMismatch) as exc:
        _fail(str(exc))
    if episodes is not None and episodes > len(seeds):
        _fail(f"the {split} split of {name} has {len(seeds)} instances, not {episodes}")
    seeds = seeds[:episodes]

    from coevo.llm.base import AGENT_SAMPLING
    from coevo.llm.embedded import ModelNotFoundError
    from coevo.llm.hf import HFBackend
    from tasks.agents import llm_policy

    try:
        llm = HFBackend.load(model)
    except ModelNotFoundError as exc:
        _fail(str(exc))
    started = time.perf_counter()
    results = rollout(name, seeds, llm_policy(llm, AGENT_SAMPLING, seed), horizon=env.horizon)
    seconds = time.perf_counter() - started
    solved = sum(e.success for e in results)
    low, high = wilson_interval(solved, len(results))
    mean_reward = sum(e.reward for e in results) / len(results)
    mean_turns = sum(len(e.turns) for e in results) / len(results)
    if as_json:
        summary = {
            "env": name,
            "horizon": env.horizon if env.horizon_knob else None,
            "split": split,
            "model": model,
            "seed": seed,
            "episodes": len(results),
            "successes": solved,
            "success_rate": solved / len(results),
            "ci95": [low, high],
            "mean_reward": mean_reward,
            "mean_turns": mean_turns,
            "seconds": seconds,
            "results": [
                {"seed": e.seed, "reward": e.reward, "success": e.success, "reason": e.reason} for e in results
            ],
        }
        print(json.dumps(summary))
        return
    print(
        f"{name}{f' H={env.horizon}' if env.horizon_knob else ''} [{split}, {len(results)} episodes, {model}] "
        f"success {solved}/{len(results)} = "
        f"{solved / len(results):.1%} (95% CI {low:.1%}-{high:.1%}); mean reward {mean_reward:.3f}; "
        f"mean turns {mean_turns:.1f}; {seconds:.1f} s"
    )


@tasks_app.command("baselines")
def tasks_baselines(
    names: Annotated[list[str] | None, typer.Argument(metavar="[TASK]...", help="Tasks (default: all).")] = None,
    split: Annotated[str, typer.Option(help="Instance split: search, val or test.")] = "val",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N instances of each group.")] = None,
) -> None:
    """Score the shipped seed and classical heuristics (trusted, in-process) with their gaps."""
    import time

    from tasks import SPLITS, TASK_NAMES, UnknownTaskError
    from tasks.baselines import classical_files, evaluate_split, file_solver, seed_solver
    from tasks.checked import checked_task

    if split not in SPLITS:
        _fail(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    try:
        tasks = {name: checked_task(name, [split]) for name in names or TASK_NAMES}
    except UnknownTaskError as exc:
        _fail(str(exc))

    console = Console(width=max(Console().width, 120))
    table = Table("task", "heuristic", "group", "objective", "gap %", "instances", "seconds", title=f"{split} split")
    for name, task in tasks.items():
        solvers = {"seed": seed_solver(task)}
        solvers |= {label: file_solver(task, path) for label, path in classical_files(task).items()}
        for label, solve in solvers.items():
            with console.status(f"{name}: {label}"):
                started = time.perf_counter()
                results = evaluate_split(task, split, solve, limit)
                seconds = time.perf_counter() - started
            for result in results:
                gap = "-" if result.gap_pct is None else f"{result.gap_pct:.2f}"
                table.add_row(
                    name, label, result.label, f"{result.objective:.4f}", gap, str(result.n_instances), f"{seconds:.1f}"
                )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    """Entry point: turns usage mistakes (ours and click's) into one line on stderr and exit 2."""
    try:
        exit_code = app(args=argv, standalone_mode=False)  # an int when a command raised typer.Exit
    except UsageProblem as exc:
        print(f"coevo: error: {shown(str(exc))}", file=sys.stderr)  # may quote a candidate's reason
        return 2
    except typer.Abort:
        print("coevo: aborted", file=sys.stderr)
        return 130
    except typer.exceptions.TyperException as exc:  # click's usage errors, vendored by typer
        message = exc.format_message()
        # A bare group shows its help (several lines); a real mistake is one line.
        print(message if "\n" in message else f"coevo: error: {message}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    return exit_code if isinstance(exit_code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
