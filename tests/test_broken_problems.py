"""A problem of one's own that is broken stops every command in one line, exit 2, leaving nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_capture import run_cli

TESTS = Path(__file__).resolve().parent
GENERATOR = "        rng = np.random.default_rng(SPLIT_SEEDS[split])\n"
REFERENCES = "for i in group.instances]\n"
SEED_CODE = '    def seed_code(self) -> str:\n        return Path(__file__).with_name("seed.py").read_text()\n'

BREAKAGES = {
    "generator": (GENERATOR, GENERATOR + "        raise ValueError('the generator is broken')\n",
                  "LoadBalance.groups('search') raised ValueError: the generator is broken"),
    "references": (REFERENCES, "for i in group.instances][:-1]\n", "15 references for 16 instances"),
    "seed_code": (SEED_CODE, "", "LoadBalance defines no seed_code(), which every task needs"),
    "instances": ("for _ in range(SIZES[split])\n        ]", "for _ in range(SIZES[split])\n        ][:0]",
                  "LoadBalance.groups('search'): group 'm8_n200' holds no list of instances"),
    "instance": ("for _ in range(SIZES[split])\n        ]", "for _ in range(SIZES[split])\n        ] + [[1.0]]",
                 "group 'm8_n200' holds a list; an instance is a dict"),
}


@pytest.fixture(params=sorted(BREAKAGES))
def broken(request, tmp_path: Path, capsys) -> tuple[Path, str]:
    """A `coevo new task` problem with one thing broken, and the message that names it."""
    assert run_cli(capsys, "new", "task", "load_balance", "--dir", str(tmp_path))[0] == 0
    problem = tmp_path / "load_balance" / "problem.py"
    old, new, message = BREAKAGES[request.param]
    text = problem.read_text()
    assert old in text
    problem.write_text(text.replace(old, new))
    return problem, message


def assert_one_line(code: int, out: str, err: str, message: str) -> None:
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith("coevo: error: task ") and message in err, err


def test_tasks_eval_refuses_a_broken_problem_in_one_line(broken, capsys):
    problem, message = broken
    spec = f"{problem}:LoadBalance"
    assert_one_line(*run_cli(capsys, "tasks", "eval", spec, str(problem.with_name("seed.py")), "--split", "search"), message)


def test_tasks_baselines_refuses_a_broken_problem_in_one_line(broken, capsys):
    problem, message = broken
    assert_one_line(*run_cli(capsys, "tasks", "baselines", f"{problem}:LoadBalance", "--split", "search"), message)


def test_run_refuses_a_broken_problem_in_one_line_before_making_its_directory(broken, capsys, monkeypatch):
    problem, message = broken
    monkeypatch.syspath_prepend(str(TESTS))
    run_dir = problem.parent / "runs" / "broken"
    code, out, err = run_cli(
        capsys, "run", str(problem.with_name("run.toml")), "--run-dir", str(run_dir), "--set", "model=scripted_llm:build"
    )
    assert_one_line(code, out, err, message)
    assert not (problem.parent / "runs").exists(), "nothing half-written is left behind"


def test_tune_refuses_a_broken_problem_in_one_line_before_making_its_study(broken, capsys):
    problem, message = broken
    config = problem.with_name("tune.toml")
    config.write_text(problem.with_name("run.toml").read_text() + "\n[tune]\npopulation_size = {choices = [2, 3]}\n")
    study = problem.parent / "study"
    assert_one_line(*run_cli(capsys, "tune", str(config), "--trials", "1", "--dir", str(study)), message)
    assert not study.exists()


def test_a_subclass_of_a_shipped_task_under_a_new_name_needs_its_own_seed(tmp_path: Path, capsys):
    problem = tmp_path / "my_tsp.py"
    problem.write_text("from tasks.tsp_construct import TSPConstruct\n\n\nclass MyTSP(TSPConstruct):\n    name = 'my_tsp'\n")
    seed = TESTS.parent / "heuristics" / "seed" / "tsp_construct.py"
    code, out, err = run_cli(capsys, "tasks", "eval", f"{problem}:MyTSP", str(seed), "--limit", "2")
    assert_one_line(code, out, err, "MyTSP.seed_code() is not implemented")
    assert "heuristics/seed" not in err
