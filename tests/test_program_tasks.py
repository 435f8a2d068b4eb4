"""Program tasks in OpenEvolve's layout: OpenEvolve's published function_minimization example, as it
is, under `tasks eval`, `run`, `resume`, `report` and `tune`; the trust split between the trusted
evaluator and the sandboxed program; evaluators that need more are refused in one line."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shutil
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

import pytest
from program_llm import ANSWER

from coevo.cli import main
from coevo.operators.parsing import FunctionSpec, ParseFailure, parse_heuristic
from coevo.plugins import spec_of
from coevo.run.config import load_config
from coevo.run.store import RunStore
from tasks import get_task
from tasks.program import stand_in
from tasks.program.evaluation_result import EvaluationResult
from tasks.program.evaluator_check import refusal

EXAMPLES = Path(__file__).resolve().parents[1] / "experiments" / "peers" / "openevolve_examples"
EXAMPLE = EXAMPLES / "function_minimization"

RUN = """
method = "hill-climb"
task = "{task}"
model = "program_llm:build"
budget = 4
seed = 0
population_size = 2
finalists = 2
[eval]
workers = 1
[settings]
batch = 1
"""


def program_folder(tmp_path: Path, program: str, evaluator: str, timeout: float | None = None) -> Path:
    """A program folder: `program` is the EVOLVE block, followed by a fixed `run()` calling `solve()`."""
    folder = tmp_path / "problem"
    folder.mkdir()
    block = textwrap.dedent(program).strip()
    fixed = "def run():\n    return solve()\n"
    (folder / "initial_program.py").write_text(f"# EVOLVE-BLOCK-START\n{block}\n# EVOLVE-BLOCK-END\n\n\n{fixed}")
    (folder / "evaluator.py").write_text(textwrap.dedent(evaluator))
    if timeout is not None:
        (folder / "config.yaml").write_text(f"evaluator:\n  timeout: {timeout}\n")
    return folder


def evaluated(folder: Path, capsys: pytest.CaptureFixture[str], program: Path | None = None) -> dict:
    """`coevo tasks eval --json` of `program` (default: the folder's initial program)."""
    program = program or folder / "initial_program.py"
    assert main(["tasks", "eval", str(folder), str(program), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("coevo: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_the_published_example_reads_as_a_task_whose_candidate_is_its_evolve_block() -> None:
    task = get_task(str(EXAMPLE))
    text = (EXAMPLE / "initial_program.py").read_text()
    assert (task.name, task.function_name, task.sense) == ("function_minimization", "search_algorithm", "max")
    assert task.signature == "search_algorithm(iterations=1000, bounds=(-5, 5))"
    assert {"evaluate_function", "run_search"} <= task.provided_names
    assert task.seed_code() in text and "def run_search" not in task.seed_code()
    assert task.module_source(task.seed_code()) == text, "the seed's program is the published file"
    assert task.candidate_code(text) == task.seed_code()
    assert task.instance_seconds == 60.0, "config.yaml's evaluator.timeout"
    assert "global minimum" in task.description and "def evaluate_function" in task.description


def test_the_function_the_llm_writes_is_the_blocks_function_that_the_fixed_part_calls(tmp_path: Path) -> None:
    program = "def helper():\n    return 1\n\n\ndef solve():\n    return helper()\n"
    task = get_task(str(program_folder(tmp_path, program, "def evaluate(program_path):\n    return {}\n")))
    assert (task.function_name, task.signature) == ("solve", "solve()")


def test_tasks_eval_runs_function_minimization_as_published(capsys: pytest.CaptureFixture[str]) -> None:
    result = evaluated(EXAMPLE, capsys)
    # random search lands within 1.5 of the minimum on every trial: the score is in (0, 1.5]
    assert result["valid"] and 0.5 < result["objective"] <= 1.5, result
    assert main(["tasks", "eval", str(EXAMPLE), str(EXAMPLE / "initial_program.py")]) == 0
    assert capsys.readouterr().out.startswith(f"{EXAMPLE} [val, 1 instances] valid; objective ")


def test_the_evaluator_loads_without_leaving_openevolve_or_a_patched_importlib_behind() -> None:
    spec_from_file_location = importlib.util.spec_from_file_location
    task = get_task(str(EXAMPLE))
    assert "openevolve" not in sys.modules and "openevolve.evaluation_result" not in sys.modules
    assert importlib.util.spec_from_file_location is spec_from_file_location
    assert task._evaluate.__globals__["EvaluationResult"] is EvaluationResult


def test_an_evaluation_still_unwinding_leaves_the_next_one_its_stand_in() -> None:
    earlier, later = SimpleNamespace(functions=frozenset({"f"})), SimpleNamespace(functions=frozenset({"g"}))
    real = importlib.util.spec_from_file_location
    with ExitStack() as first:
        first.enter_context(stand_in.serving(earlier))
        assert hasattr(importlib.import_module("program"), "f")
        with stand_in.serving(later):
            first.close()  # the earlier evaluation's thread ends while the later one runs
            program = importlib.util.module_from_spec(
                importlib.util.spec_from_file_location("p", stand_in.PROGRAM_PATH)
            )
            assert hasattr(program, "g") and hasattr(importlib.import_module("program"), "g")
    assert importlib.util.spec_from_file_location is real and "program" not in sys.modules


def test_the_fixed_part_names_are_usable_by_an_answer() -> None:
    task = get_task(str(EXAMPLE))
    answer = ANSWER.format(samples=100, step=0.5)
    parsed = parse_heuristic(answer, FunctionSpec.from_signature(task.signature, task.provided_names))
    assert not isinstance(parsed, ParseFailure), parsed
    refused = parse_heuristic(answer, FunctionSpec.from_signature(task.signature))
    assert isinstance(refused, ParseFailure) and "evaluate_function" in refused.reason


def test_a_run_evolves_the_block_and_resume_and_report_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "run.toml"
    config.write_text(RUN.format(task=EXAMPLE))
    run_dir = tmp_path / "run"
    assert main(["run", str(config), "--run-dir", str(run_dir)]) == 0
    capsys.readouterr()
    store = RunStore.open(run_dir)
    try:
        candidates = [candidate for _, candidate in store.candidates()]
    finally:
        store.close()
    task = get_task(str(EXAMPLE))
    seed = task.seed_code()
    evolved = [c for c in candidates if c.code != seed]
    assert evolved and all(c.valid for c in evolved), [c.reason for c in candidates]
    text = (EXAMPLE / "initial_program.py").read_text()
    head, tail = text.split("# EVOLVE-BLOCK-START")[0], text.split("# EVOLVE-BLOCK-END")[1]
    for candidate in evolved:
        program = task.module_source(candidate.code)
        assert program.startswith(head + "# EVOLVE-BLOCK-START\n") and program.endswith("# EVOLVE-BLOCK-END" + tail)
        assert "np.random.normal" in program, "the block is the answer's"
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert (before["status"], before["task"], before["evaluations"]) == ("finished", str(EXAMPLE), 4)
    assert main(["resume", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == before
    (run_dir / "report.html").unlink()
    assert main(["report", str(run_dir)]) == 0
    assert "search_algorithm" in (run_dir / "report.html").read_text()
    capsys.readouterr()
    assert main(["runs", "export", str(run_dir), "--out", str(tmp_path / "lib"), "--name", "best"]) == 0
    exported = Path(capsys.readouterr().out.strip())
    assert exported.name == "function_minimization__best.py"
    assert exported.read_text().endswith(task.module_source(before["best"]["code"])), "the whole program"
    assert evaluated(EXAMPLE, capsys, exported)["valid"]


def test_a_folder_in_a_config_is_taken_from_the_config_files_directory(tmp_path: Path) -> None:
    config = EXAMPLE.parent / "run.toml"
    try:
        config.write_text(RUN.format(task="./function_minimization"))
        assert load_config(config).task == str(EXAMPLE)
    finally:
        config.unlink()


@pytest.mark.parametrize(
    "loading",
    [
        "spec = importlib.util.spec_from_file_location('program', program_path)\n"
        "    program = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(program)",
        "spec = spec_from_file_location('anything', program_path)  # bound when the evaluator loaded\n"
        "    program = module_from_spec(spec)\n"
        "    spec.loader.exec_module(program)",
        "program = importlib.import_module(os.path.splitext(os.path.basename(program_path))[0])",
        "program = __import__('program')",
        "sys.path.insert(0, os.path.dirname(program_path))\n    import program",
    ],
    ids=["spec_from_file_location", "bound_at_load", "import_module", "__import__", "import"],
)
def test_every_way_of_loading_the_program_gives_its_sandboxed_functions(tmp_path: Path, capsys, loading: str) -> None:
    evaluator = (
        "import importlib\nimport importlib.util\nimport os\nimport sys\n"
        "from importlib.util import module_from_spec, spec_from_file_location\n\n\n"
        f"def evaluate(program_path):\n    {loading}\n"
        "    return {'combined_score': program.run(), 'has_solve': float(hasattr(program, 'solve'))}\n"
    )
    folder = program_folder(tmp_path, "def solve():\n    return 4.0\n", evaluator)
    assert evaluated(folder, capsys)["objective"] == 4.0
    assert (
        "program" not in sys.modules and importlib.util.spec_from_file_location.__module__ != "tasks.program.stand_in"
    )


def test_a_program_returning_an_object_that_is_not_data_is_refused(tmp_path: Path, capsys) -> None:
    folder = program_folder(
        tmp_path,
        """
        class Box:
            pass


        def solve():
            return Box()
        """,
        """
        import importlib.util

        def evaluate(program_path):
            spec = importlib.util.spec_from_file_location("program", program_path)
            program = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(program)
            return {"combined_score": 1.0 if program.run() is not None else 0.0}
        """,
    )
    result = evaluated(folder, capsys)
    assert not result["valid"] and "contains a Box, which cannot leave the sandbox" in result["reason"]


def test_an_endless_program_is_stopped_on_the_trusted_clock_whatever_the_evaluator_catches(tmp_path, capsys) -> None:
    folder = program_folder(
        tmp_path,
        """
        def solve():
            while True:
                pass
        """,
        """
        import importlib

        def evaluate(program_path):
            try:
                return {"combined_score": float(importlib.import_module("program").run())}
            except Exception:
                return {"combined_score": 99.0}
        """,
        timeout=1,
    )
    result = evaluated(folder, capsys)
    assert not result["valid"] and re.search(
        r"per-instance limit 1 s|per-candidate time limit of 1 s", result["reason"]
    )


def test_the_programs_exceptions_reach_the_evaluator_and_its_arguments_must_be_data(tmp_path, capsys) -> None:
    folder = program_folder(
        tmp_path,
        """
        class Unusual(Exception):
            pass


        def solve():
            return [1, 2][5]


        def strange(value):
            raise Unusual(f"no {value}")


        def echo(*args, **kwargs):
            return args, kwargs
        """,
        """
        import numpy as np


        def evaluate(program_path):
            program = __import__("program")
            passed = []
            args, kwargs = program.echo((1, "a"), np.arange(3), key=[2.5])
            passed.append(args[0] == (1, "a") and args[1].tolist() == [0, 1, 2] and kwargs == {"key": [2.5]})
            try:
                program.run()
            except IndexError as error:
                passed.append("list index out of range" in str(error))
            try:
                program.strange(7)
            except RuntimeError as error:
                passed.append(str(error) == "Unusual: no 7")
            try:
                program.echo(object())
            except TypeError as error:
                passed.append("echo() was given something that is not plain data" in str(error))
            try:
                program.Unusual
            except AttributeError as error:
                passed.append("stay there" in str(error))
            return {"combined_score": float(sum(passed)), "checks": float(len(passed))}
        """,
    )
    task = get_task(str(folder))
    assert task.name == "problem" and task.function_name == "solve"
    result = evaluated(folder, capsys)
    assert result["valid"] and result["objective"] == 5.0, result


def test_the_metrics_and_artifacts_of_an_evaluation_result_cross_as_metrics(tmp_path: Path, capsys) -> None:
    folder = program_folder(
        tmp_path,
        """
        def solve():
            return 3
        """,
        """
        from openevolve.evaluation_result import EvaluationResult

        def evaluate(program_path):
            value = __import__("program").run()
            return EvaluationResult(metrics={"a": value, "b": 1.0, "note": "text"}, artifacts={"log": "x"})
        """,
    )
    assert evaluated(folder, capsys)["objective"] == 2.0, "no combined_score: the mean of the numeric metrics"


def test_an_evaluator_that_unpickles_and_starts_a_process_is_refused_in_one_line(tmp_path, capsys) -> None:
    folder = program_folder(
        tmp_path,
        """
        def solve():
            return 1
        """,
        """
        import pickle
        import subprocess
        import sys

        def evaluate(program_path):
            subprocess.run([sys.executable, program_path], check=True)
            with open(program_path + ".results", "rb") as results:
                return pickle.load(results)
        """,
    )
    assert main(["tasks", "eval", str(folder), str(folder / "initial_program.py")]) == 2
    error = one_line_error(capsys)
    assert "evaluator.py cannot run under coevo: it unpickles (import pickle, line 2)" in error
    assert "a pickle the program wrote would run code in the trusted process" in error
    assert "it starts a process (import subprocess, line 3)" in error
    config = tmp_path / "run.toml"
    config.write_text(RUN.format(task=folder))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "run")]) == 2
    assert "it unpickles" in one_line_error(capsys) and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("def evaluate(program_path):\n    return {'n': len(open(program_path).read())}\n", "(open, line 2)"),
        (
            "from pathlib import Path\n\ndef evaluate(path):\n    return Path(path).read_text()\n",
            "(.read_text, line 4)",
        ),
        ("import os\n\ndef evaluate(program_path):\n    os.system('python ' + program_path)\n", "(os.system, line 4)"),
        ("def evaluate(program_path):\n    import dill\n    return dill.loads(b'')\n", "(import dill, line 2)"),
        ("CONFIG = open(__file__).read()\n\ndef evaluate(program_path):\n    return {}\n", None),
        ("def settings():\n    with open('config.yaml') as f:\n        return f.read()\n", None),
    ],
    ids=["reads_the_program", "path_read_text", "os_system", "dill_inside", "own_file_at_load", "own_config"],
)
def test_the_evaluator_check_refuses_what_needs_files_processes_or_pickles(source: str, refused: str | None) -> None:
    reason = refusal(source, "evaluator.py")
    assert reason is None if refused is None else refused in reason, reason


def test_openevolves_published_circle_packing_evaluator_is_refused_for_its_pickle(capsys) -> None:
    folder = EXAMPLES / "circle_packing"
    assert main(["tasks", "eval", str(folder), str(folder / "initial_program.py")]) == 2
    assert one_line_error(capsys) == (
        f"coevo: error: task {str(folder)!r}: evaluator.py cannot run under coevo: it unpickles (import pickle, "
        "line 14), and a pickle the program wrote would run code in the trusted process; it starts a process "
        "(import subprocess, line 10) to run the program outside coevo's sandbox; it exchanges files with the program "
        "(import tempfile, line 11), but it runs in a process that has none; an evaluator may only call the "
        "program's functions, which coevo runs in its sandbox"
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"evaluator.py": "def evaluate(path):\n    return {}\n"}, "it has no initial_program.py"),
        ({"initial_program.py": "def f():\n    return 1\n", "evaluator.py": ""}, "must hold one # EVOLVE-BLOCK-START"),
        (
            {"initial_program.py": "# EVOLVE-BLOCK-START\nX = 1\n# EVOLVE-BLOCK-END\n", "evaluator.py": ""},
            "defines no function for the LLM to write",
        ),
        (
            {
                "initial_program.py": "# EVOLVE-BLOCK-START\ndef f():\n    return 1\n# EVOLVE-BLOCK-END\n",
                "evaluator.py": "",
            },
            "evaluator.py defines no evaluate(program_path)",
        ),
    ],
)
def test_a_folder_that_is_not_a_program_task_is_one_line(tmp_path: Path, capsys, files: dict, message: str) -> None:
    folder = tmp_path / "problem"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    assert main(["tasks", "eval", str(folder), str(folder / "evaluator.py")]) == 2
    assert message in one_line_error(capsys)


def test_tune_runs_trials_on_a_program_task(tmp_path: Path, capsys) -> None:
    config = tmp_path / "study.toml"
    config.write_text(RUN.format(task=EXAMPLE) + "[tune]\npopulation_size = {choices = [2, 3]}\n")
    assert main(["tune", str(config), "--trials", "2", "--dir", str(tmp_path / "tune")]) == 0
    out = capsys.readouterr().out
    assert "study study: 2 complete" in out and (tmp_path / "tune" / "best.toml").is_file()


def test_a_subclass_in_a_file_of_ones_own_changes_the_time_limit(tmp_path: Path, capsys) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "function_minimization")
    (tmp_path / "problem.py").write_text(
        "from tasks.program_task import ProgramTask\n\n\n"
        "class Minimise(ProgramTask):\n"
        '    folder = "function_minimization"\n'
        "    instance_seconds = 20.0\n"
    )
    spec = f"{tmp_path / 'problem.py'}:Minimise"
    task = get_task(spec)
    assert (task.name, task.instance_seconds, task.function_name) == ("function_minimization", 20.0, "search_algorithm")
    assert spec_of(type(task)) == spec
    assert main(["tasks", "eval", spec, str(EXAMPLE / "initial_program.py"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["valid"]
