"""Killing a run with SIGKILL at any point and resuming it ends exactly where an uninterrupted run ends.

The runs go through the real CLI in subprocesses (the scripted LLM stands in for the model, so ES
updates really change what it writes); kills land between and inside steps.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CONFIG = """
method = "{method}"
task = "tsp_construct"
model = "scripted_llm:build"
budget = 34
seed = 5
population_size = 4
[eval]
limit = 4
workers = 1
[es]
sigma = 0.05
alpha = 0.05
"""


def coevo(*args: str, wait: bool = True) -> subprocess.Popen | subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "coevo.cli", *args]
    if wait:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    log = tempfile.TemporaryFile()  # a file, not a pipe: nobody reads it while the process runs
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)
    process.stderr_log = log
    return process


def how_it_ended(process: subprocess.Popen) -> str:
    """The exit status and stderr's tail of a process started with wait=False, for a failure message."""
    process.stderr_log.seek(0)
    return f"exit {process.returncode}: {process.stderr_log.read().decode(errors='replace')[-2000:]}"


def committed_steps(run_dir: Path) -> int:
    try:
        with sqlite3.connect(run_dir / "run.sqlite", timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def kill_after(process: subprocess.Popen, run_dir: Path, steps: int, extra_seconds: float) -> bool:
    """SIGKILL once `steps` steps are committed (plus a delay, to land inside the next step)."""
    deadline = time.monotonic() + 240
    while committed_steps(run_dir) < steps:
        if process.poll() is not None:
            assert process.returncode == 0, how_it_ended(process)
            return False
        if time.monotonic() > deadline:
            raise TimeoutError(f"run did not reach step {steps}")
        time.sleep(0.02)
    time.sleep(extra_seconds)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


def show(run_dir: Path) -> dict:
    result = coevo("runs", "show", str(run_dir), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("method", ["eoh+es", "coevo"])
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path, method: str) -> None:
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(method=method))
    straight = tmp_path / "straight"
    finished = coevo("run", str(config), "--run-dir", str(straight))
    assert finished.returncode == 0, finished.stderr
    expected = show(straight)
    assert expected["status"] == "finished" and expected["evaluations"] == 34
    assert expected["weights_sha256"] is not None and expected["best"] is not None

    interrupted = tmp_path / "interrupted"
    process = coevo("run", str(config), "--run-dir", str(interrupted), wait=False)
    kills = 0
    if kill_after(process, interrupted, steps=1, extra_seconds=0.0):
        kills += 1
        assert show(interrupted)["status"] == "interrupted", "a run whose process is gone is not running"
    for steps, delay in ((3, 0.3), (5, 0.05)):
        process = coevo("resume", str(interrupted), wait=False)
        kills += kill_after(process, interrupted, steps=steps, extra_seconds=delay)
    assert kills >= 2, "the run finished before it could be killed twice; make it longer"
    resumed = coevo("resume", str(interrupted))
    assert resumed.returncode == 0, resumed.stderr

    actual = show(interrupted)
    assert actual["status"] == "finished"
    assert actual["evaluations"] == expected["evaluations"]
    assert actual["weights_sha256"] == expected["weights_sha256"]
    assert actual["best"] == expected["best"]
    assert actual["llm_calls"] == expected["llm_calls"]  # an interrupted step leaves no trace


def test_sigterm_stops_after_the_last_committed_step_and_says_how_to_resume(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(method="eoh"))
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "coevo.cli", "run", str(config), "--run-dir", str(run_dir)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while committed_steps(run_dir) < 1 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert err.strip().splitlines()[-1] == (
        f"coevo: interrupted; `coevo resume {run_dir}` continues the run from its last committed step"
    )
    facts = show(run_dir)
    assert facts["status"] == "interrupted" and facts["evaluations"] < 34
    assert coevo("resume", str(run_dir)).returncode == 0
    assert show(run_dir)["status"] == "finished"
