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


def _proc(root: Path, threads: dict[int, list[tuple[str, int]]]) -> Path:
    """A fake /proc: per process id, its threads' (state, nice)."""
    for pid, states in threads.items():
        for index, (state, nice) in enumerate(states):
            task = root / str(pid) / "task" / str(pid + index)
            task.mkdir(parents=True)
            fields = [state, *["0"] * 15, str(nice), "1"]
            (task / "stat").write_text(f"{pid + index} (worker (x)) {' '.join(fields)}\n")  # a name may hold ") "
    (root / "loadavg").write_text("9.00 9.00 9.00 7/245 12345\n")  # not a process: never read as one
    return root


def test_other_processes_running_threads_count_by_their_scheduler_weight(tmp_path: Path) -> None:
    proc = _proc(
        tmp_path,
        {
            100: [("R", 0), ("R", 0), ("S", 0)],  # this process: never counted
            200: [("R", 0), ("S", 0)],  # one running thread at our priority: a whole core
            300: [("R", 19), ("R", 19)],  # a nice-19 job: a sliver each
            400: [("D", 0)],  # waiting on I/O: not runnable
            500: [("R", -5)],  # more important than us: still at most one core
        },
    )
    busy = threads.runnable_elsewhere(proc, own_pid=100, own_nice=0)
    assert busy == pytest.approx(1 + 2 * 1.25**-19 + 1)
    assert threads.runnable_elsewhere(proc, own_pid=100, own_nice=19) == pytest.approx(4.0)  # niced ourselves


def test_a_niced_background_job_leaves_both_cores_to_a_normal_process(tmp_path: Path) -> None:
    proc = _proc(tmp_path, {200: [("R", 19)], 300: [("R", 19)]})
    busy = threads.runnable_elsewhere(proc, own_pid=1, own_nice=0)
    assert threads.idle_core_count(2, busy, current=2) == 2
    assert threads.idle_core_count(2, threads.runnable_elsewhere(proc, own_pid=1, own_nice=19), current=2) == 1


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
    assert "2.0 other runnable threads on 2 usable CPUs" in choice.reason
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
    assert current_choice() == ThreadChoice(1, "automatic: 2.0 other runnable threads on 2 usable CPUs", True)
    assert "coevo: torch threads 1 (automatic: 2.0 other runnable threads on 2 usable CPUs)" in capsys.readouterr().err
    assert main(["serve", "--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err


def test_a_run_records_its_choice_and_why(two_cpus: None, tmp_path: Path) -> None:
    configure_threads(busy=lambda: 2.0)
    start_run(config("sample", budget=7), tmp_path).close()
    configure_threads(busy=lambda: 0.0)
    resume_run(tmp_path).close()
    recorded = json.loads(_meta(tmp_path, THREADS_KEY))
    assert [(r["threads"], r["automatic"]) for r in recorded] == [(1, True), (2, True)]  # the resume chose anew
    assert "2.0 other runnable threads" in recorded[0]["reason"]


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
