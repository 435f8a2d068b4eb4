"""What /proc says of a sandbox process's PID namespace, for the tests that watch one from outside."""

from __future__ import annotations

from pathlib import Path


def namespace_pids(pid: int) -> list[int]:
    """The process's pid in each PID namespace it is in, outermost (this one's) first."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(number) for number in line.split()[1:]]
    raise KeyError("NSpid")

