"""`coevo new task`: the problem it writes is real and runs through every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_capture import run_cli

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def problem(tmp_path: Path, capsys) -> Path:
    code, out, err = run_cli(capsys, "new", "task", "load_balance", "--dir", str(tmp_path))
    assert code == 0, err
    folder = tmp_path / "load_balance"
    assert f"coevo tasks eval {folder}/problem.py:LoadBalance {folder}/seed.py" in out
    assert f"coevo run {folder}/run.toml" in out
    return folder


def test_the_problem_evaluates_with_a_gap_and_refuses_a_bad_answer(problem: Path, capsys):
    spec = f"{problem}/problem.py:LoadBalance"
    code, out, err = run_cli(capsys, "tasks", "eval", spec, str(problem / "seed.py"), "--json")
    assert code == 0, err
    seed = json.loads(out)
    assert seed["valid"] and seed["n_instances"] == 16 and 0 < seed["gap_pct"] < 50
    bad = problem / "bad.py"
    bad.write_text("def choose_machine(job, loads):\n    return -1\n")
    code, out, _ = run_cli(capsys, "tasks", "eval", spec, str(bad), "--json")
    assert code == 0 and not json.loads(out)["valid"] and "not a machine" in json.loads(out)["reason"]


def test_the_problem_passes_its_own_tests(problem: Path):
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(problem)],
        capture_output=True, text=True, timeout=300, cwd=problem.parent,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "2 passed" in finished.stdout


def test_the_problem_runs_through_run_show_report_export_resume_and_tune(problem: Path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    fast = ["--set", "model=scripted_llm:build", "--set", "budget=8", "--set", "eval.limit=3"]
    run_dir = problem / "run"
    code, _, err = run_cli(capsys, "run", str(problem / "run.toml"), "--run-dir", str(run_dir), *fast)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "runs", "show", str(run_dir), "--json")
    assert code == 0 and json.loads(out)["status"] == "finished"
    assert run_cli(capsys, "report", str(run_dir))[0] == 0
    code, out, _ = run_cli(capsys, "runs", "export", str(run_dir), "--out", str(problem / "lib"), "--name", "best")
    assert code == 0 and Path(out.strip()).name == "load_balance__best.py"
    assert run_cli(capsys, "resume", str(run_dir))[0] == 0

    tune = problem / "tune.toml"
    tune.write_text(
        (problem / "run.toml").read_text().replace("smollm2-135m", "scripted_llm:build").replace("budget = 24", "budget = 8")
        + "\n[tune]\npopulation_size = {choices = [2, 3]}\n"
    )
    code, _, err = run_cli(capsys, "tune", str(tune), "--trials", "2", "--dir", str(problem / "study"), "--pruner", "none")
    assert code == 0, err
    assert len(list((problem / "study" / "trials").iterdir())) == 2


@pytest.mark.parametrize(
    ("name", "message"), [("Load-Balance", "lower-case letters"), ("", "lower-case letters")]
)
def test_a_bad_name_writes_nothing(tmp_path: Path, capsys, name: str, message: str):
    code, out, err = run_cli(capsys, "new", "task", name, "--dir", str(tmp_path))
    assert code == 2 and out == "" and message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_an_existing_problem_is_never_overwritten(problem: Path, capsys):
    (problem / "seed.py").write_text("# mine\n")
    code, _, err = run_cli(capsys, "new", "task", "load_balance", "--dir", str(problem.parent))
    assert code == 2 and "already exists" in err
    assert (problem / "seed.py").read_text() == "# mine\n"
