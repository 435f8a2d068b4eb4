"""`coevo run | resume | report | runs show | runs export` through the CLI entry point."""

from __future__ import annotations

import html
import re
import json
import socket
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scripted_llm import HEURISTIC, ScriptedLLM

import coevo
from coevo.candidate import Candidate
from coevo.cli import main
from coevo.llm.openai_compat import OpenAICompatLLM
from coevo.run.config import load_config
from coevo.run.store import RunStore

CONFIG = """
method = "coevo"
task = "tsp_construct"
model = "scripted_llm:build"
budget = 18
seed = 2
population_size = 4
[eval]
limit = 4
[es]
sigma = 0.05
alpha = 0.05
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(CONFIG)
    return path


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("coevo: error: ") and "\n" not in err, err
    return err


def error_after_progress(capsys: pytest.CaptureFixture[str]) -> str:
    """The one-line error that ends a run's output on stderr, after its progress bar."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and lines[-1].startswith("coevo: error: ") and "Traceback" not in "".join(lines), lines
    return lines[-1]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "bogus=1"], "unknown config key 'bogus'"),
        (["--set", "method=annealing"], "config key 'method'"),
        (["--set", "method=eoh+es", "--set", "llm.api_base=http://127.0.0.1:9/v1"], "prompt-only"),
        (["--set", "model=no-such-model"], "neither an embedded model"),
        (["--set", "budget"], "--set expects key=value"),
    ],
)
def test_bad_run_input_exits_2_with_one_line(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r"), *extra]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "r" / "run.sqlite").exists(), "a rejected config leaves no run behind"


def test_missing_config_and_unreadable_run_dirs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.toml")]) == 2
    assert "config file not found" in one_line_error(capsys)
    for command in (["resume"], ["report"], ["runs", "show"], ["runs", "export"]):
        assert main([*command, str(tmp_path / "missing")]) == 2
        assert "no run found" in one_line_error(capsys)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "run.sqlite").write_bytes(b"this is not a database" * 100)
    assert main(["runs", "show", str(garbage)]) == 2
    assert "cannot read run" in one_line_error(capsys)


def test_run_show_export_and_refuse_to_overwrite(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", str(config), "--run-dir", str(run_dir), "--set", "seed=4"]) == 0
    out = capsys.readouterr().out
    assert "seed heuristic on val: gap" in out and f"report: {run_dir / 'report.html'}" in out
    assert (run_dir / "report.html").is_file()

    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    keys = {"status", "method", "task", "env", "evaluations", "llm_calls", "best", "heldout", "weights_sha256"}
    assert set(facts) == keys
    assert (facts["status"], facts["method"], facts["evaluations"]) == ("finished", "coevo", 18)
    assert (facts["task"], facts["env"], facts["heldout"]) == ("tsp_construct", None, {})
    assert set(facts["best"]) == {"key", "chosen_on", "figures", "code"}
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT json_extract(value, '$.seed') FROM meta WHERE key = 'config'").fetchone()[0] == 4

    monkeypatch.chdir(tmp_path)
    assert main(["runs", "export", str(run_dir), "--name", "demo"]) == 0
    assert Path(capsys.readouterr().out.strip()).resolve() == tmp_path / "skills" / "tsp_construct__demo.py"
    assert not list((Path(coevo.__file__).parents[1] / "heuristics").rglob("*__demo.py")), "never inside the package"
    assert main(["runs", "export", str(run_dir), "--out", str(tmp_path / "lib"), "--name", "demo"]) == 0
    exported = Path(capsys.readouterr().out.strip())
    assert exported == tmp_path / "lib" / "tsp_construct__demo.py"
    text = exported.read_text()
    provenance = json.loads("\n".join(line[2:] for line in text.splitlines()[1:] if line.startswith("# ")))
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        validation = json.loads(db.execute("SELECT value FROM meta WHERE key = 'validation'").fetchone()[0])
    assert provenance["method"] == "coevo" and provenance["key"] == validation["best_key"]
    assert provenance["val"] == validation["best"], "the export is the finalist selected on val"
    # one answer everywhere: `runs show` (JSON and text) and the report name the exported heuristic,
    # with its val figure from the validation and its search figure labelled as such
    answer = facts["best"]
    assert (answer["key"], answer["chosen_on"], provenance["chosen_on"]) == (provenance["key"], "val", "val")
    assert answer["figures"]["val"] == {k: validation["best"][k] for k in ("objective", "gap_pct")}
    exported_candidate = [c for c in candidates(run_dir) if c.key == answer["key"]][0]
    searched = {"objective": exported_candidate.objective, "gap_pct": exported_candidate.gap_pct}
    assert answer["figures"]["search"] == searched
    line = (
        f"best heuristic {answer['key']} (chosen on the val split): "
        f"on val: gap {validation['best']['gap_pct']:.3f}%, objective {validation['best']['objective']:.6g}; "
        f"on search: gap {exported_candidate.gap_pct:.3f}%, objective {exported_candidate.objective:.6g}"
    )
    assert f"{line}\n" in out, "the run's own closing lines name it too"
    assert main(["runs", "show", str(run_dir)]) == 0
    assert f"  {line}\n" in capsys.readouterr().out
    page = (run_dir / "report.html").read_text()
    assert html.escape(line) in page and html.escape(text.split("\n\n", 1)[1].strip()) in page
    # validation scores val under the run's eval settings: its first eval.limit = 4 instances
    assert main(["tasks", "eval", "tsp_construct", str(exported), "--limit", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == pytest.approx(validation["best"]["objective"])

    assert main(["run", str(config), "--run-dir", str(run_dir)]) == 2
    assert "already holds a run" in one_line_error(capsys)
    assert main(["runs", "export", str(run_dir), "--name", "bad name!"]) == 2
    assert "export name" in one_line_error(capsys)


def candidates(run_dir: Path) -> list[Candidate]:
    store = RunStore.open(run_dir)
    try:
        return [c for _, c in store.candidates()]
    finally:
        store.close()


def test_resume_of_a_finished_run_changes_nothing(config: Path, tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", str(config), "--run-dir", str(run_dir)]) == 0
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    before = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert main(["resume", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == before


@pytest.mark.parametrize(
    ("typo", "message"),
    [
        ("budget = 18", "unknown config key 'budjet' (did you mean 'budget'?)"),
        ("[es]", "unknown config key 'es.budjet'"),
    ],
)
def test_a_misspelt_key_in_the_file_is_named_not_reported_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], typo: str, message: str
) -> None:
    path = tmp_path / "typo.toml"
    path.write_text(CONFIG.replace(typo, f"{typo}\nbudjet = 129" if typo == "[es]" else "budjet = 129"))
    assert main(["run", str(path), "--run-dir", str(tmp_path / "r")]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("damage", ["DROP TABLE steps", "DROP TABLE meta"])
def test_a_damaged_run_database_is_one_line_naming_the_file(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", str(config), "--run-dir", str(run_dir), "--set", "budget=4"]) == 0
    capsys.readouterr()
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        db.execute(damage)
    missing = damage.split()[-1]
    for command in (["runs", "show"], ["resume"], ["report"], ["runs", "export"]):
        assert main([*command, str(run_dir)]) == 2, command
        err = one_line_error(capsys)
        assert str(run_dir / "run.sqlite") in err and f"missing table {missing}" in err, err


INTERRUPTS: list[int] = []
"""The call at which the next `build_interrupted` LLM presses Ctrl-C (one entry per LLM built)."""


class InterruptedLLM(ScriptedLLM):
    """The scripted LLM with Ctrl-C pressed during one of its calls."""

    def __init__(self, max_batch_size: int) -> None:
        super().__init__(max_batch_size)
        self.calls = 0
        self.stop_at = INTERRUPTS.pop() if INTERRUPTS else None

    def generate(self, requests, sampling):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return super().generate(requests, sampling)


def build_interrupted(config) -> InterruptedLLM:
    return InterruptedLLM(config.llm.max_batch_size)


def test_ctrl_c_says_how_to_resume_and_the_run_shows_as_interrupted(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    INTERRUPTS.append(3)
    assert (
        main(["run", str(config), "--run-dir", str(run_dir), "--set", "model=test_run_commands:build_interrupted"])
        == 130
    )
    err = capsys.readouterr().err
    assert f"coevo: interrupted; `coevo resume {run_dir}` continues the run" in err
    assert " evals  best on search " in err, "the progress bar's best is the search split's"
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["status"] == "interrupted" and 0 < facts["evaluations"] < 18
    assert main(["runs", "show", str(run_dir)]) == 0
    assert f"{run_dir}: interrupted, coevo on tsp_construct" in capsys.readouterr().out
    assert main(["resume", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["status"], facts["evaluations"]) == ("finished", 18)


class _ChatServer(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint that answers every chat completion with one fixed heuristic."""

    def __init__(self, port: int) -> None:
        text = HEURISTIC.format(coefficient="0.25")

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 40},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", port), Handler)


def test_an_llm_server_that_does_not_answer_is_one_line_and_a_kept_run_resumes_once_it_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(OpenAICompatLLM, "_delay", lambda self, attempt, retry_after: 0.0)  # retry at once
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path / "served.toml"
    path.write_text(
        CONFIG.replace('method = "coevo"', 'method = "sample"').replace("budget = 18", "budget = 4")
        + f'[settings]\nbatch = 2\n[llm]\napi_base = "http://127.0.0.1:{port}/v1"\n'
    )
    run_dir = tmp_path / "runs" / "served"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 2
    err = error_after_progress(capsys)
    assert f"127.0.0.1:{port}" in err and "no run was started" in err
    assert not (tmp_path / "runs").exists(), "a run that never started leaves no directory"

    # a run whose server went away after it was created (as older versions left one) is kept
    store = RunStore.create(run_dir, load_config(path).model_dump(mode="json"))
    store.close()
    assert main(["resume", str(run_dir)]) == 2
    err = error_after_progress(capsys)
    assert f"127.0.0.1:{port}" in err and f"`coevo resume {run_dir}` continues the run" in err
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"

    server = _ChatServer(port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert main(["resume", str(run_dir)]) == 0
    finally:
        server.shutdown()
        server.server_close()
    capsys.readouterr()
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["status"], facts["evaluations"], facts["llm_calls"]) == ("finished", 4, 3)  # and the seed


def test_a_run_logged_to_a_file_prints_its_progress_as_whole_lines(tmp_path: Path, capsys):
    problem = tmp_path / "a_problem_with_a_long_enough_name_to_pass_eighty_columns.py"
    problem.write_text("from tasks.tsp_construct import TSPConstruct\n\n\nclass LongNamedTSP(TSPConstruct):\n    pass\n")
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.replace('"coevo"', '"eoh"').replace('"tsp_construct"', f'"{problem.name}:LongNamedTSP"'))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r"), "--set", "budget=8"]) == 0
    progress = [line for line in capsys.readouterr().err.splitlines() if " evals " in line]
    whole = re.compile(rf"eoh {re.escape(str(problem))}:LongNamedTSP gen \d+ (\d+)/8 evals  best on search \S+ \d+:\d\d:\d\d")
    assert progress and all(whole.match(line) for line in progress), progress
    assert [int(whole.match(line).group(1)) for line in progress][-1] == 8


def test_a_run_stopped_while_it_validates_is_interrupted_and_resume_finishes_it(
    config: Path, tmp_path: Path, capsys, monkeypatch
):
    from coevo.run import commands, validation

    real_validate = validation.validate_best

    def terminated(runner):  # SIGTERM after the last step, while the answer is chosen on val
        raise commands._Terminated

    monkeypatch.setattr(validation, "validate_best", terminated)
    run_dir = tmp_path / "r"
    assert main(["run", str(config), "--run-dir", str(run_dir), "--set", "budget=8"]) == 143
    capsys.readouterr()
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"

    monkeypatch.setattr(validation, "validate_best", real_validate)
    assert main(["resume", str(run_dir)]) == 0
    assert "(chosen on the val split)" in capsys.readouterr().out
    assert main(["runs", "show", str(run_dir), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["status"] == "finished" and facts["best"]["chosen_on"] == "val"
