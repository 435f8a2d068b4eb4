"""Every time limit holds by the trusted side's clock, whatever the candidate's process says or does.

Each case in tests/breach/clock/ stalls where an honest candidate would time out, and lies about
time on the way (stops or poisons its process's clocks, claims progress it has not made, says
its module has run before it has), with the Python guards off, in each layering of ``layerings``. Its verdict
must be the timeout its honest twin gets: the same source without the lines between ``# lie:``
and ``# end lie``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from coevo.evaluate import Evaluator, Limits
from coevo.evaluate.probe import ProbeTask
from tasks.base import Heuristic, Instance
from tasks.checks import returned_index
from layerings import LAYERINGS, unguarded_evaluator

CLOCK_DIR = Path(__file__).with_name("breach") / "clock"
LIMITS = Limits(instance_seconds=1.0, candidate_seconds=8.0, memory_mb=320)
_HEADER = re.compile(r"^# (expect|task): (.+)$", re.MULTILINE)
_LIE = re.compile(r"^# lie:\n.*?^# end lie\n", re.MULTILINE | re.DOTALL)


class SteppedProbe(ProbeTask):
    """The probe task in lockstep: two calls per instance, each step one message for all of them."""

    child_runs_driver = False

    async def drive(self, heuristic: Heuristic, instance: Instance) -> int:
        returned_index(await heuristic(), self.function_name)
        return returned_index(await heuristic(), self.function_name)


TASKS = {"probe": ProbeTask, "stepped": SteppedProbe}


def cases() -> list[pytest.param]:
    return [pytest.param(path, id=path.stem) for path in sorted(CLOCK_DIR.glob("*.candidate"))]


@pytest.fixture(scope="module", params=list(LAYERINGS))
def evaluators(request: pytest.FixtureRequest) -> Iterator[dict[str, Evaluator]]:
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(unguarded_evaluator(request.param, task(), limits=LIMITS, workers=2))
            for name, task in TASKS.items()
        }


@pytest.mark.parametrize("path", cases())
def test_a_candidate_that_lies_about_time_times_out_as_its_honest_twin_does(path: Path, evaluators: dict[str, Evaluator]) -> None:
    code = path.read_text()
    header = dict(_HEADER.findall(code))
    honest = _LIE.sub("", code)
    assert honest != code, "the case marks its lie"
    lying_result, honest_result = evaluators[header.get("task", "probe")].evaluate_many([code, honest])
    for result in (honest_result, lying_result):
        assert not result.valid and re.search(header["expect"], result.reason), result.reason

