"""How many threads torch (OpenMP) computes with, by default: no more than the cores other work leaves idle.

torch starts one compute thread per core. On a shared or busy machine those threads wait on each other
while other processes hold the cores, and a generation can run many times slower than with one thread.
So at start-up coevo looks at the cores this process may use (`os.sched_getaffinity`) and the
one-minute load average (`os.getloadavg`): when other work keeps some cores busy, torch gets the idle
ones, at least one; on an idle machine torch keeps its own default.

The user decides instead by setting `OMP_NUM_THREADS` (left as it is) or, for `coevo serve`, with
`--threads N`. The choice is written to `OMP_NUM_THREADS`, so a torch imported later and every child
process (evaluation workers, servers) follow it too.
"""

from __future__ import annotations

import os
import sys

THREADS_ENV = "OMP_NUM_THREADS"


def default_thread_count(usable_cpus: int, load_average: float) -> int | None:
    """The cores the load leaves idle (rounded, at least 1), or None when all are idle: torch's default."""
    idle = int(usable_cpus - load_average + 0.5)
    return None if idle >= usable_cpus else max(1, idle)


def configure_threads(threads: int | None = None) -> int | None:
    """Apply the thread count once, before heavy work: `threads` if given, else the user's
    `OMP_NUM_THREADS` if set, else `default_thread_count` of this machine. Returns the count set, or
    None where the user's variable or torch's default stays."""
    if threads is None:
        if os.environ.get(THREADS_ENV):
            return None
        threads = default_thread_count(len(os.sched_getaffinity(0)), os.getloadavg()[0])
        if threads is None:
            return None
    if threads < 1:
        raise ValueError(f"the thread count must be at least 1, got {threads}")
    os.environ[THREADS_ENV] = str(threads)
    if "torch" in sys.modules:  # already imported: it read the variable before we set it
        sys.modules["torch"].set_num_threads(threads)
    return threads
