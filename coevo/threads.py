"""How many threads torch (OpenMP) computes with, by default: the cores other work leaves idle now.

torch starts one compute thread per core. While other processes hold those cores, the threads wait on
each other at every parallel region, and a generation can run many times slower than on one thread.
So, unless the user chose a count, coevo counts the tasks the kernel has runnable right now (the
fourth field of /proc/loadavg, read a few times over `SAMPLE_S`), less this process's own running
threads, and gives torch the usable cores (`os.sched_getaffinity`) they leave idle, at least one.
Where the process may use only some of the machine's CPUs, the machine's count is taken by their share.
The one-minute load average is not used: it still shows work that ended a minute ago.

The choice is made at start-up, before torch loads, and again between generation batches (never
inside one), at most every `RECHECK_S`; it moves only when the idle cores it sees are more than
`MARGIN` of a core away from the count torch has, so a count does not flap on a noisy reading.

The user decides instead with `OMP_NUM_THREADS`, a run config's `llm.threads` or `coevo serve
--threads N`; the last two win over the variable and are written to it, so child processes follow.
An automatic count is not written to the variable: a child process chooses for itself. Each choice
is logged on `coevo.threads` (`coevo --verbose` prints it).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

THREADS_ENV = "OMP_NUM_THREADS"
SAMPLES = 5
SAMPLE_S = 0.05
"""The readings of a choice are spread over this long: one reading catches a moment, not the load."""
RECHECK_S = 10.0
MARGIN = 0.75
"""How far (in cores) the idle estimate must be from torch's count before the count moves."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count torch computes with, why, and whether coevo keeps choosing it (`automatic`)."""

    threads: int | None
    """None: as the user's `OMP_NUM_THREADS` says, where it is not one number."""
    reason: str
    automatic: bool

    def to_json(self) -> dict[str, int | str | bool | None]:
        return {"threads": self.threads, "reason": self.reason, "automatic": self.automatic}


def runnable_elsewhere(loadavg: str, own_running: int) -> int:
    """Runnable tasks that are not this process's: /proc/loadavg's "running/total" field less ours."""
    running = int(loadavg.split()[3].split("/")[0])
    return max(0, running - own_running)


def own_running_threads(tasks: Path = Path("/proc/self/task")) -> int:
    """This process's threads the kernel has runnable now (state R): the reader itself at least."""
    running = 0
    for task in tasks.iterdir():
        try:
            state = (task / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):  # the thread ended meanwhile
            continue
        running += state == b"R"
    return max(1, running)


def busy_elsewhere(samples: int = SAMPLES, span_s: float = SAMPLE_S, reading: Callable[[], int] | None = None) -> float:
    """The mean number of other runnable tasks over `samples` readings spread over `span_s`, on the CPUs
    this process may use: /proc/loadavg counts the whole machine's, so they count by those CPUs' share."""
    read = reading or (lambda: runnable_elsewhere(Path("/proc/loadavg").read_text(), own_running_threads()))
    counts = []
    for sample in range(samples):
        if sample:
            time.sleep(span_s / (samples - 1))
        counts.append(read())
    share = len(os.sched_getaffinity(0)) / (os.cpu_count() or 1)
    return share * sum(counts) / len(counts)


def idle_core_count(usable_cpus: int, busy: float, current: int) -> int:
    """The cores `busy` other runnable tasks leave idle, rounded, between 1 and `usable_cpus`; `current`
    while that estimate is within `MARGIN` of it."""
    idle = usable_cpus - busy
    if abs(idle - current) <= MARGIN:
        return current
    return min(usable_cpus, max(1, round(idle)))


class _Policy:
    """The process's choice so far; `automatic` ones are made again by `keep_threads_current`."""

    def __init__(self) -> None:
        self.choice: ThreadChoice | None = None
        self.checked_at = 0.0


_policy = _Policy()


def configure_threads(
    threads: int | None = None, source: str = "--threads", busy: Callable[[], float] | None = None
) -> ThreadChoice:
    """Choose torch's thread count, before heavy work: `threads` (chosen by the user through `source`)
    if given, else the user's `OMP_NUM_THREADS` if set, else the cores other work leaves idle now (an
    automatic choice, made again between batches by `keep_threads_current`; `busy` counts the other
    runnable tasks, `busy_elsewhere` by default)."""
    if threads is not None:
        if threads < 1:
            raise ValueError(f"the thread count must be at least 1, got {threads}")
        os.environ[THREADS_ENV] = str(threads)
        return _apply(ThreadChoice(threads, f"set by {source}", automatic=False))
    if value := os.environ.get(THREADS_ENV):
        count = int(value) if value.strip().isdigit() else None
        return _apply(ThreadChoice(count, f"{THREADS_ENV}={value} set by the user", automatic=False))
    return _apply(_automatic_choice((busy or busy_elsewhere)(), _torch_threads()))


def keep_threads_current(busy: Callable[[], float] | None = None) -> None:
    """Before a generation batch: where the count is automatic, choose it again from what runs now (at
    most every `RECHECK_S`); apply a choice made before torch was imported."""
    choice = _policy.choice
    if choice is None or not choice.automatic:
        return
    if time.monotonic() - _policy.checked_at >= RECHECK_S:
        choice = _automatic_choice((busy or busy_elsewhere)(), _torch_threads())
    _apply(choice)


def current_choice() -> ThreadChoice | None:
    """The last choice `configure_threads` or `keep_threads_current` made in this process, if any."""
    return _policy.choice


def _automatic_choice(busy: float, current: int) -> ThreadChoice:
    usable = len(os.sched_getaffinity(0))
    _policy.checked_at = time.monotonic()
    threads = idle_core_count(usable, busy, current)
    return ThreadChoice(threads, f"automatic: {busy:.1f} other runnable tasks on {usable} usable CPUs", True)


def _torch_threads() -> int:
    """torch's count now, or the one it will start with (all usable cores) where it is not imported yet."""
    if "torch" in sys.modules:
        return sys.modules["torch"].get_num_threads()
    return len(os.sched_getaffinity(0))


def _apply(choice: ThreadChoice) -> ThreadChoice:
    """Set torch's count where it is imported and differs; log a choice whose count or kind is new."""
    torch = sys.modules.get("torch")
    if choice.threads is not None and torch is not None and torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    previous = _policy.choice
    if previous is None or (previous.threads, previous.automatic) != (choice.threads, choice.automatic):
        log.info("torch threads %s (%s)", choice.threads if choice.threads is not None else "as set", choice.reason)
    _policy.choice = choice
    return choice
