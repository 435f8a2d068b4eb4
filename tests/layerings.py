"""The kernel layerings the sandbox is tested in with the Python guards off.

Root's: a uid of its own per candidate. A user's without root: candidates share one uid (built
here by leaving the uid layer out, so a machine that runs the tests as root checks both). And
that one where the kernel gives no PID namespaces, so seccomp alone keeps a candidate off the
processes it can name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

from coevo.evaluate import Evaluator
from coevo.evaluate.probe import ProbeTask
from tasks.base import Task

LAYERINGS = {
    "own uids": frozenset(),
    "shared uid": frozenset({"own_uids"}),
    "shared uid, no pid namespaces": frozenset({"own_uids", "pids"}),
}
"""Layering -> the kernel layers left out to build it."""


@contextlib.contextmanager
def unguarded_evaluator(layering: str, task: Task | str | None = None, **settings: Any) -> Iterator[Evaluator]:
    """An evaluator of ``task`` (the probe task by default) with the Python guards off, in
    ``layering``, its fork server started; the test is skipped where the machine cannot build
    that layering or lacks a layer it needs."""
    skipped = LAYERINGS[layering]
    if skipped == {"own_uids"} and os.geteuid() != 0:
        pytest.skip("without root every candidate shares one uid: the other layering is this one")
    with Evaluator(task or ProbeTask(), python_guards=False, skipped_layers=skipped, **settings) as unguarded:
        unguarded.evaluate(unguarded.task.seed_code())  # starts the fork server, which reports its layers
        # Without root, children share one uid and seccomp refuses them fork and any call on
        # another process; without a PID namespace, the uid or seccomp still keeps them apart.
        optional = {"pids"} | ({"own_uids"} if skipped or os.geteuid() != 0 else set())
        missing = [name for name, held in unguarded.sandbox.layers.items() if held is not True and name not in optional]
        if missing:  # the evaluator has warned; with the guards off such a machine is not safe
            pytest.skip(f"this kernel does not provide the sandbox layers {missing}")
        yield unguarded
