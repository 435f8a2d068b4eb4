"""Tasks and environments named as plugins: a file, a module, or a registered entry point."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_capture import run_cli

from coevo.plugins import PluginError, normalised, registered
from coevo.workloads.agents import AgentSettings
from tasks import TASK_NAMES, UnknownTaskError, get_task
from tasks.agents import ENV_NAMES, UnknownEnvError, env_class, make_env, rollout
from tasks.agents.splits import env_seeds, verify_split
from tasks.kp_construct import KPConstruct

SEED = Path(__file__).resolve().parent.parent / "heuristics" / "seed" / "kp_construct.py"

COUNTER_ENV = '''
class CountTo:
    """Say the next number until you reach three."""

    max_turns = 5
    splits = {"search": [1, 2], "val": [3], "test": [4, 5, 6]}

    def reset(self, seed):
        self.n = 0
        return f"instance {seed}: say the next number after {self.n}", {}

    def step(self, action):
        if action.strip() == str(self.n + 1):
            self.n += 1
        done = self.n == 3
        return f"now at {self.n}", float(done), done, False, {"success": done}
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_builtins_are_registered_as_entry_points_like_any_package():
    assert registered("coevo.tasks")["kp_construct"] == "tasks.kp_construct:KPConstruct"
    assert set(TASK_NAMES) >= {"tsp_construct", "kp_construct", "bpp_online", "tsp_aco", "cvrp_aco", "bpp_aco"}
    assert registered("coevo.envs")["gridnav"] == "tasks.agents.gridnav:GridNav"
    assert "gridnav" in ENV_NAMES


def test_a_task_named_by_module_or_file_loads_its_class(tmp_path):
    assert isinstance(get_task("tasks.kp_construct:KPConstruct"), KPConstruct)
    path = write(
        tmp_path, "my_kp.py", "from tasks.kp_construct import KPConstruct\nclass MyKP(KPConstruct):\n    pass\n"
    )
    task = get_task(f"{path}:MyKP")
    assert isinstance(task, KPConstruct) and type(task).__name__ == "MyKP"


@pytest.mark.parametrize(
    ("source", "attribute", "message"),
    [
        (None, "X", "file {path} not found"),
        ("x = 1\n", "Missing", "Missing is not defined there"),
        ("x = 1\n", "x", "x is not a class"),
        ("class NotATask:\n    pass\n", "NotATask", "NotATask is not a task (it does not subclass tasks.Task)"),
        ("raise RuntimeError('broken on import')\n", "X", "raised RuntimeError: broken on import"),
        (
            "from tasks.kp_construct import KPConstruct\nclass Bad(KPConstruct):\n    def __init__(self):\n"
            "        raise ValueError('bad generator')\n",
            "Bad",
            "Bad() raised ValueError: bad generator",
        ),
    ],
)
def test_a_broken_task_plugin_is_one_line_naming_it(tmp_path, source, attribute, message):
    path = tmp_path / "problem.py"
    if source is not None:
        path.write_text(source)
    spec = f"{path}:{attribute}"
    with pytest.raises(UnknownTaskError) as caught:
        get_task(spec)
    text = str(caught.value)
    assert "\n" not in text and spec in text and message.format(path=path) in text


def test_an_unknown_name_lists_what_is_registered():
    from tasks import TASKS

    with pytest.raises(PluginError, match="unknown task 'chess'; known tasks: .*kp_construct"):
        TASKS.get("chess")
    with pytest.raises(PluginError, match="module 'no_such_module' not found"):
        TASKS.get("no_such_module:X")


def test_one_registry_shape_serves_every_kind_and_lists_where_each_comes_from(tmp_path):
    """A kind is a Registry: built-in names beside registered ones, a check in words, one error shape."""
    from coevo.plugins import Registry
    from coevo.plugins_cli import installed

    (tmp_path / "shapes.py").write_text("class Circle:\n    area = 1\n\nclass Blob:\n    pass\n")
    shapes = Registry(
        "coevo.no_such_group",
        "shape",
        lambda cls: None if hasattr(cls, "area") else "it needs area",
        built_in={"circle": f"{tmp_path / 'shapes.py'}:Circle"},
    )
    assert shapes.names() == ("circle",) and shapes.get("circle").area == 1
    with pytest.raises(PluginError, match=r"^shape '.*shapes.py:Blob': Blob is not a shape \(it needs area\)$"):
        shapes.get(f"{tmp_path / 'shapes.py'}:Blob")
    with pytest.raises(PluginError, match=r"^unknown shape 'square'; known shapes: circle \(or name one"):
        shapes.get("square")
    assert shapes.sources() == {"circle": (f"{tmp_path / 'shapes.py'}:Circle", "built in")}
    rows = installed()
    kinds = {row["kind"] for row in rows}
    assert kinds == {"method", "workload", "task", "environment", "backend", "executor", "ES strategy", "embedder"}
    ars = next(row for row in rows if row["name"] == "ars")
    assert ars == {
        "kind": "ES strategy",
        "name": "ars",
        "class": "coevo.es.ars:ARS",
        "package": "coevo",
        "group": "coevo.es_strategies",
    }


def test_file_specs_become_absolute_and_names_stay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalised("problem.py:Problem") == f"{tmp_path / 'problem.py'}:Problem"
    assert normalised("problem.py:Problem", tmp_path / "sub") == f"{tmp_path / 'sub' / 'problem.py'}:Problem"
    assert normalised("pkg.mod:Problem") == "pkg.mod:Problem"
    assert normalised("kp_construct") == "kp_construct"


def test_cli_evaluates_a_heuristic_on_a_plugin_task(capsys, tmp_path):
    path = write(
        tmp_path, "my_kp.py", "from tasks.kp_construct import KPConstruct\nclass MyKP(KPConstruct):\n    pass\n"
    )
    code, out, err = run_cli(capsys, "tasks", "eval", f"{path}:MyKP", str(SEED), "--limit", "2", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["valid"] and result["n_instances"] > 0


def test_cli_reports_a_broken_plugin_in_one_line(capsys, tmp_path):
    path = write(tmp_path, "broken.py", "raise ImportError('needs a package that is not there')\n")
    code, out, err = run_cli(capsys, "tasks", "eval", f"{path}:Problem", str(SEED))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "needs a package that is not there" in err


def test_a_gymnasium_style_env_from_a_file_plays_through_rollout(tmp_path):
    spec = f"{write(tmp_path, 'count.py', COUNTER_ENV)}:CountTo"
    cls = env_class(spec)
    assert cls.horizons == (1,) and cls.description == "Say the next number until you reach three."
    assert env_seeds(spec, "test") == [4, 5, 6] and verify_split(spec, "val", 1) == [3]
    env = make_env(spec)
    assert env.max_turns == 5 and env.reset(7).startswith("instance 7")

    def counting(prompts):
        return [str(int(str(p).rsplit(" ", 1)[1]) + 1) for p in prompts]

    solved, stuck = rollout(spec, [1, 2], counting), rollout(spec, [1], lambda ps: ["no"] * len(ps))
    assert [e.success for e in solved] == [True, True] and [len(e.turns) for e in solved] == [3, 3]
    assert not stuck[0].success and len(stuck[0].turns) == 5


def test_an_env_without_horizons_shows_no_h_and_its_action_ending_reaches_the_policy(tmp_path, capsys):
    stops = "    max_turns = 5\n    action_stop = ('.',)\n    max_action_tokens = 4\n"
    path = write(tmp_path, "count.py", COUNTER_ENV.replace("    max_turns = 5\n", stops))
    spec = f"{path}:CountTo"
    assert AgentSettings(kind="agent", env=spec).subject == spec, "no H=1 for an environment without a knob"
    assert AgentSettings(kind="agent", env="gridnav", horizon=2).subject == "gridnav-H2"
    seen = []

    def counting(prompts):
        seen.extend(prompts)
        return [str(int(str(p).rsplit(" ", 1)[1]) + 1) for p in prompts]

    rollout(spec, [1], counting)
    assert seen and all(p.stop == (".",) and p.max_tokens == 4 for p in seen)
    knob = "    horizons = (1, 2)\n    max_turns = 5\n"
    horizons = write(tmp_path, "knob.py", COUNTER_ENV.replace("    max_turns = 5\n", knob))
    assert AgentSettings(kind="agent", env=f"{horizons}:CountTo").subject == f"{horizons}:CountTo-H1"


def test_workload_settings_take_an_env_spec_and_refuse_a_class_without_step(tmp_path, monkeypatch):
    write(tmp_path, "count.py", COUNTER_ENV)
    write(tmp_path, "half.py", "class Half:\n    def reset(self, seed):\n        return ''\n")
    monkeypatch.chdir(tmp_path)
    settings = AgentSettings(kind="agent", env="count.py:CountTo")
    assert settings.env == f"{tmp_path / 'count.py'}:CountTo" and settings.agent_horizon == 1
    with pytest.raises(UnknownEnvError, match="Half has no step method"):
        env_class("half.py:Half")


PLUGIN_RUN = """
method = "{method}"
task = "{task}"
model = "scripted_llm:build"
budget = 10
seed = 1
population_size = 4
[eval]
limit = 3
[es]
sigma = 0.05
alpha = 0.05
"""


MY_TSP = (
    "from tasks.tsp_construct import TSPConstruct\n\n\nclass MyTSP(TSPConstruct):\n    name = 'my_tsp'\n\n"
    "    def seed_code(self):\n        return TSPConstruct().seed_code()\n"
)


@pytest.mark.parametrize("method", ["coevo", "eoh", "sample"])
def test_every_run_command_works_on_a_task_from_a_file(capsys, tmp_path, monkeypatch, method):
    problem = write(tmp_path, "my_tsp.py", MY_TSP)
    config = tmp_path / "run.toml"
    config.write_text(PLUGIN_RUN.format(method=method, task="my_tsp.py:MyTSP"))
    monkeypatch.chdir(tmp_path.parent)  # a relative file spec in a config is taken from the config's directory
    run_dir = tmp_path / "run"
    assert run_cli(capsys, "run", str(config), "--run-dir", str(run_dir))[0] == 0
    monkeypatch.chdir(problem.parent.parent)  # resume, report and export find the file from anywhere
    code, out, _ = run_cli(capsys, "runs", "show", str(run_dir), "--json")
    assert code == 0 and json.loads(out)["task"] == f"{problem}:MyTSP"
    assert run_cli(capsys, "report", str(run_dir))[0] == 0 and (run_dir / "report.html").is_file()
    code, out, err = run_cli(capsys, "runs", "export", str(run_dir), "--out", str(tmp_path / "lib"), "--name", "best")
    assert code == 0, err
    assert Path(out.strip()) == tmp_path / "lib" / "my_tsp__best.py"
    assert run_cli(capsys, "resume", str(run_dir))[0] == 0


def test_tune_runs_trials_on_a_task_from_a_file(capsys, tmp_path, monkeypatch):
    write(tmp_path, "my_tsp.py", MY_TSP)
    config = tmp_path / "tune.toml"
    config.write_text(
        PLUGIN_RUN.format(method="coevo", task="my_tsp.py:MyTSP")
        + '[tune]\n"es.sigma" = {low = 1e-3, high = 1e-1, log = true}\n'
    )
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(
        capsys, "tune", str(config), "--trials", "2", "--dir", str(tmp_path / "study"), "--pruner", "none"
    )
    assert code == 0, err
    trials = sorted((tmp_path / "study" / "trials").iterdir())
    assert len(trials) == 2 and all((trial / "run.sqlite").is_file() for trial in trials)
    assert "my_tsp" in (tmp_path / "study" / "best.toml").read_text()


def test_a_problem_whose_seed_fails_it_stops_the_run_in_one_line_leaving_nothing(capsys, tmp_path, monkeypatch):
    write(
        tmp_path,
        "broken_seed.py",
        MY_TSP.replace(
            "return TSPConstruct().seed_code()", "return 'def select_next_node(a, b, c, d):\\n    return -1\\n'"
        ),
    )
    config = tmp_path / "run.toml"
    config.write_text(PLUGIN_RUN.format(method="eoh", task="broken_seed.py:MyTSP"))
    run_dir = tmp_path / "runs" / "broken"
    code, out, err = run_cli(capsys, "run", str(config), "--run-dir", str(run_dir))
    last = err.strip().splitlines()[-1]  # after the progress bar: one line, no traceback
    assert code == 2 and last.startswith("coevo: error: task ") and "Traceback" not in err
    assert "its seed heuristic fails on its own search instances" in last and "broken_seed.py:MyTSP" in last
    assert not (tmp_path / "runs").exists(), "nothing half-written is left behind"


@pytest.mark.parametrize(
    ("subject", "method", "expected"),
    [
        ("/tmp/x/problem.py:LoadBalance", "eoh", "LoadBalance-eoh-s3-"),
        ("/tmp/x/guess.py:GuessNumber-H1", "es", "GuessNumber-H1-es-s3-"),
        ("tsp_construct", "eoh+es", "tsp_construct-eoh_es-s3-"),
        ("gridnav-H2", "/tmp/m.py:HillClimb", "gridnav-H2-HillClimb-s3-"),
        ("/tmp/x/function_minimization", "hill-climb", "function_minimization-hill-climb-s3-"),
    ],
)
def test_a_run_named_by_a_plugin_spec_lands_under_runs(subject, method, expected):
    from types import SimpleNamespace

    from coevo.run.session import default_run_dir

    path = default_run_dir(SimpleNamespace(subject=subject, method=method, seed=3))
    assert path.parent == Path("runs") and path.name.startswith(expected) and ":" not in path.name
