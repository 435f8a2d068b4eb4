"""The default torch thread count: the cores other work leaves idle now, unless the user chose."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from test_runner import config

from coevo import threads
from coevo.run.session import THREADS_KEY, resume_run, start_run
from coevo.run.store import RunStore
from coevo.threads import (
    THREADS_ENV,
    ThreadChoice,
    busy_elsewhere,
    configure_threads,
    current_choice,
    idle_core_count,
    keep_threads_current,
    own_running_threads,
    runnable_elsewhere,
)


def _torch_stand_in() -> types.SimpleNamespace:
    torch = types.SimpleNamespace(count=2)
    torch.get_num_threads = lambda: torch.count
    torch.set_num_threads = lambda count: setattr(torch, "count", count)
    return torch


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """An imported torch whose thread count the tests read; the real one keeps its own. Only for tests
    that import nothing: a module importing torch meanwhile would bind this one."""
    torch = _torch_stand_in()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})


def test_other_runnable_tasks_are_the_loadavg_running_field_less_this_process() -> None:
    assert runnable_elsewhere("1.52 1.20 0.90 3/245 12345\n", own_running=1) == 2
    assert runnable_elsewhere("9.00 9.00 9.00 1/245 12345\n", own_running=1) == 0  # the load of a minute ago
    assert runnable_elsewhere("0.00 0.00 0.00 2/245 12345\n", own_running=3) == 0


def test_this_process_counts_its_running_threads_only(tmp_path: Path) -> None:
    for task, state in (("100", "R"), ("101", "S"), ("102", "R"), ("103", "D")):
        (tmp_path / task).mkdir()
        (tmp_path / task / "stat").write_text(f"{task} (pt (main) {state} 1 2 3\n")  # a name may hold ") "
    assert own_running_threads(tmp_path) == 2


def test_the_readings_are_averaged_over_the_cpus_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([3, 5, 4, 4, 4])
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    assert busy_elsewhere(5, 0.0, lambda: next(readings)) == 4.0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # a quarter of the machine
    assert busy_elsewhere(2, 0.0, lambda: 4) == 1.0


@pytest.mark.parametrize(
    ("cpus", "busy", "current", "expected"),
    [
        (2, 0.0, 2, 2),  # idle: every core
        (2, 2.0, 2, 1),  # both cores busy: one thread, never zero
        (2, 1.0, 2, 1),
        (2, 0.4, 2, 2),  # a passing task: not enough to drop a thread
        (2, 0.4, 1, 1),  # nor to take one back
        (2, 0.2, 1, 2),  # the other work has ended
        (16, 4.2, 16, 12),
        (16, 40.0, 12, 1),
        (1, 3.0, 1, 1),
    ],
)
def test_torch_gets_the_idle_cores_and_keeps_its_count_on_small_changes(
    cpus: int, busy: float, current: int, expected: int
) -> None:
    assert idle_core_count(cpus, busy, current) == expected


def test_a_busy_machine_gives_torch_one_thread_without_writing_the_variable(
    two_cpus: None, fake_torch: types.SimpleNamespace
) -> None:
    choice = configure_threads(busy=lambda: 2.0)
    assert (choice.threads, choice.automatic, fake_torch.count) == (1, True, 1)
    assert "2.0 other runnable tasks on 2 usable CPUs" in choice.reason
    assert THREADS_ENV not in os.environ  # a child process chooses for itself


def test_the_count_is_chosen_again_between_batches_not_more_often(
    two_cpus: None, fake_torch: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(threads.time, "monotonic", lambda: now[0])
    configure_threads(busy=lambda: 2.0)
    keep_threads_current(busy=lambda: 0.0)
    assert fake_torch.count == 1, "too soon after the last choice"
    now[0] += threads.RECHECK_S
    keep_threads_current(busy=lambda: 0.0)
    assert fake_torch.count == 2, "the other work has ended"
    now[0] += threads.RECHECK_S
    keep_threads_current(busy=lambda: 0.5)
    assert fake_torch.count == 2, "half a core of other work is within the margin"


def test_a_choice_made_before_torch_is_imported_applies_once_it_is(
    two_cpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    configure_threads(busy=lambda: 1.0)
    torch = _torch_stand_in()
    monkeypatch.setitem(sys.modules, "torch", torch)
    keep_threads_current(busy=lambda: pytest.fail("no new look within RECHECK_S"))
    assert torch.count == 1


def test_the_users_variable_and_an_explicit_count_win_and_stay(
    monkeypatch: pytest.MonkeyPatch, fake_torch: types.SimpleNamespace
) -> None:
    never = lambda: pytest.fail("the machine is not looked at")  # noqa: E731
    monkeypatch.setenv(THREADS_ENV, "3")
    assert configure_threads(busy=never).reason == f"{THREADS_ENV}=3 set by the user"
    assert fake_torch.count == 3 and os.environ[THREADS_ENV] == "3"
    choice = configure_threads(2, "config llm.threads", busy=never)
    assert (choice.threads, choice.reason, choice.automatic) == (2, "set by config llm.threads", False)
    assert os.environ[THREADS_ENV] == "2" and fake_torch.count == 2  # children follow
    monkeypatch.setattr(threads, "RECHECK_S", 0.0)
    keep_threads_current(busy=never)
    assert current_choice() == choice
    with pytest.raises(ValueError, match="at least 1"):
        configure_threads(0)


def test_an_already_imported_torch_is_set_too() -> None:
    code = "import torch; from coevo.threads import configure_threads; configure_threads(1); print(torch.get_num_threads())"
    env = {**os.environ, THREADS_ENV: "2"}
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "1"
    )


def test_the_command_line_chooses_at_start_up_and_says_why_when_verbose(
    two_cpus: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from coevo.cli import main

    monkeypatch.setattr(logging.getLogger(threads.__name__), "handlers", [])  # --verbose adds one, for this test
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 2.0)
    assert main(["--verbose", "tasks", "list", "--json"]) == 0
    assert current_choice() == ThreadChoice(1, "automatic: 2.0 other runnable tasks on 2 usable CPUs", True)
    assert "coevo: torch threads 1 (automatic: 2.0 other runnable tasks on 2 usable CPUs)" in capsys.readouterr().err
    assert main(["serve", "--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err


def test_a_run_records_its_choice_and_why(two_cpus: None, tmp_path: Path) -> None:
    configure_threads(busy=lambda: 2.0)
    start_run(config("sample", budget=7), tmp_path).close()
    configure_threads(busy=lambda: 0.0)
    resume_run(tmp_path).close()
    recorded = json.loads(_meta(tmp_path, THREADS_KEY))
    assert [(r["threads"], r["automatic"]) for r in recorded] == [(1, True), (2, True)]  # the resume chose anew
    assert "2.0 other runnable tasks" in recorded[0]["reason"]


def test_the_config_key_wins_over_the_variable(two_cpus: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(THREADS_ENV, "2")
    start_run(config("sample", budget=7, llm={"threads": 1}), tmp_path).close()
    recorded = json.loads(_meta(tmp_path, THREADS_KEY))
    assert [(r["threads"], r["reason"]) for r in recorded] == [(1, "set by config llm.threads")]
    assert sys.modules["torch"].get_num_threads() == 1 and os.environ[THREADS_ENV] == "1"


def _meta(run_dir: Path, key: str) -> str:
    store = RunStore.open(run_dir)
    try:
        return store.meta(key)
    finally:
        store.close()
