"""The default torch thread count: the cores other work leaves idle, unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from coevo.threads import THREADS_ENV, configure_threads, default_thread_count


@pytest.fixture(autouse=True)
def keep_this_process_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """`configure_threads` also sets an imported torch's count; the test process keeps its own."""
    if "torch" in sys.modules:
        monkeypatch.setattr(sys.modules["torch"], "set_num_threads", lambda threads: None)


@pytest.mark.parametrize(
    ("cpus", "load", "expected"),
    [
        (2, 0.1, None),  # idle: torch keeps its own default
        (2, 0.6, 1),  # another process holds most of a core
        (2, 2.9, 1),  # busy: one thread, never zero
        (2, 40.0, 1),
        (16, 4.2, 12),  # the idle cores of a big machine
        (16, 15.6, 1),
        (1, 0.0, None),
    ],
)
def test_default_gives_torch_the_idle_cores(cpus: int, load: float, expected: int | None) -> None:
    assert default_thread_count(cpus, load) == expected


def test_a_busy_machine_sets_the_variable_that_torch_and_children_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    assert configure_threads() == 1
    assert os.environ[THREADS_ENV] == "1"


def test_the_users_variable_and_an_explicit_count_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "3")
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    assert configure_threads() is None and os.environ[THREADS_ENV] == "3"
    assert configure_threads(2) == 2 and os.environ[THREADS_ENV] == "2"
    with pytest.raises(ValueError, match="at least 1"):
        configure_threads(0)


def test_an_already_imported_torch_is_set_too() -> None:
    code = "import torch; from coevo.threads import configure_threads; configure_threads(1); print(torch.get_num_threads())"
    env = {**os.environ, THREADS_ENV: "2"}
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "1"
    )


def test_the_command_line_applies_the_default_at_start_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coevo.cli import main

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (2.2, 2.0, 2.0))
    assert main(["tasks", "list", "--json"]) == 0
    assert os.environ[THREADS_ENV] == "2"
    assert main(["serve", "--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err
