"""The shared evaluator: verdicts, scoring in the parent, the JSON contract, caching, parallelism."""

from __future__ import annotations

import hashlib
import json
import marshal
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
from stand_in_child import supervise_late

from coevo.candidate import fitness_of
from coevo.evaluate import Evaluator, Limits
from coevo.evaluate.channel import ChannelError, FrameReader, decode_solution, frame
from coevo.evaluate.child import Job
from coevo.evaluate.evaluator import JSON_FIELDS
from coevo.evaluate.probe import ProbeTask
from coevo.evaluate.sandbox import _DEADLINE_GRACE_SECONDS, InstancePayload, Sandbox
from tasks import TASK_NAMES, get_task
from tasks.base import InstanceGroup, InvalidSolution
from tasks.checks import returned_index
from tasks.plain_data import encode_solution
from tasks.references import gap_pct

LIMITS = Limits(instance_seconds=3.0, candidate_seconds=5.0, memory_mb=512)
SEED = ProbeTask().seed_code()


class MaximisingProbe(ProbeTask):
    """The probe task reported with the opposite natural sign."""

    sense = "max"


class LargeProbe(ProbeTask):
    """The probe task with a search split of several MB: far more than a pipe holds at once."""

    def groups(self, split: str) -> list[InstanceGroup]:
        rng = np.random.default_rng(5)
        return [InstanceGroup("n20000", [{"values": rng.random(20_000)} for _ in range(40)])]


class SlowWindowProbe(ProbeTask):
    """Instances that each take well under the per-instance limit but together far more, with a
    window's reply larger than a pipe holds: the parent reads it in several chunks, after the
    child has marked every instance done."""

    CALLS = 30_000
    SECONDS = 1.0

    def groups(self, split: str) -> list[InstanceGroup]:
        rng = np.random.default_rng(6)
        return [InstanceGroup("n8", [{"values": rng.random(8)} for _ in range(4)])]

    async def drive(self, heuristic, instance) -> int:
        for _ in range(self.CALLS):
            chosen = returned_index(await heuristic(), self.function_name)
        return chosen

    def answer_state(self, instance):
        return {**instance, "slept": False}

    def answer(self, function, state) -> int:
        if not state["slept"]:
            state["slept"] = True
            time.sleep(self.SECONDS)
        return super().answer(function, state)


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator(ProbeTask(), limits=LIMITS) as shared:
        yield shared


def smallest_values(split: str = "search") -> list[float]:
    return [float(inst["values"].min()) for group in ProbeTask().groups(split) for inst in group.instances]


def count_sandbox_runs(evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    run = evaluator.sandbox.run

    def counting(code: str, *args: object) -> object:
        calls.append(code)
        return run(code, *args)

    monkeypatch.setattr(evaluator.sandbox, "run", counting)
    return calls


def test_valid_candidate_is_scored_by_the_task(evaluator: Evaluator) -> None:
    result = evaluator.evaluate(SEED)
    assert result.valid and result.reason is None
    assert result.per_instance == pytest.approx(smallest_values())
    assert result.objective == pytest.approx(float(np.mean(smallest_values())))
    assert result.n_instances == len(smallest_values())
    assert result.code_hash == hashlib.sha256(SEED.encode()).hexdigest()
    assert result.gap_pct is None  # the probe task ships no references


def test_json_contract(evaluator: Evaluator) -> None:
    for code in (SEED, "def pick(values):\n    return 99\n"):
        payload = json.loads(json.dumps(evaluator.evaluate(code).to_json()))
        assert list(payload) == list(JSON_FIELDS)
        assert (payload["reason"] is None) == payload["valid"] == (payload["objective"] is not None)


def test_invalid_candidates_do_not_stop_the_batch(evaluator: Evaluator) -> None:
    codes = ["def pick(values):\n    return -3\n", SEED + "# twin\n", "def pick(values):\n    raise ValueError('no')\n"]
    first, second, third = evaluator.evaluate_many(codes)
    assert first.reason == "instance 1/4 (n8): index -3 is out of range 0..7"
    assert second.valid
    assert third.reason == "instance 1/4 (n8): pick raised ValueError: no"


def test_results_are_cached_in_memory(evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_sandbox_runs(evaluator, monkeypatch)
    code = SEED + "# memory cache\n"
    first = evaluator.evaluate(code)
    assert evaluator.evaluate(code) == first
    assert calls == [code]


def test_evaluate_many_deduplicates_and_keeps_order(evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_sandbox_runs(evaluator, monkeypatch)
    zero, one = (f"def pick(values):\n    return {index}\n# order\n" for index in (0, 1))
    results = evaluator.evaluate_many([zero, one, zero])
    assert sorted(calls) == sorted([zero, one])
    assert results[0] == results[2]
    assert results[1].per_instance == pytest.approx(
        [float(inst["values"][1]) for group in ProbeTask().groups("search") for inst in group.instances]
    )


def test_results_are_cached_on_disk(tmp_path: Path) -> None:
    with Evaluator(ProbeTask(), limits=LIMITS, cache_dir=tmp_path) as first:
        computed = first.evaluate(SEED)
    with Evaluator(ProbeTask(), limits=LIMITS, cache_dir=tmp_path) as second:
        second.sandbox.run = None  # type: ignore[method-assign] - any sandbox use would crash
        assert second.evaluate(SEED) == computed
        assert second.sandbox.server_pid is None


def test_cache_separates_instance_sets_and_limits(tmp_path: Path) -> None:
    with Evaluator(ProbeTask(), limits=LIMITS, cache_dir=tmp_path) as full:
        full.evaluate(SEED)
    with Evaluator(ProbeTask(), limit=2, limits=LIMITS, cache_dir=tmp_path) as limited:
        result = limited.evaluate(SEED)
    assert result.n_instances == 2
    assert result.per_instance == pytest.approx(smallest_values()[:2])
    sleeper = "import time\n\ndef pick(values):\n    time.sleep(0.3)\n    return 0\n"
    with Evaluator(ProbeTask(), limits=Limits(instance_seconds=0.2), cache_dir=tmp_path) as tight:
        assert not tight.evaluate(sleeper).valid
    with Evaluator(ProbeTask(), limits=LIMITS, cache_dir=tmp_path) as loose:
        assert loose.evaluate(sleeper).valid  # not the cached verdict of the tighter limits
    assert len(list(tmp_path.glob("*.json"))) == 4


def test_candidates_run_in_parallel() -> None:
    sleepers = [f"import time\n\ndef pick(values):\n    time.sleep(0.5)\n    return {i}\n" for i in range(2)]
    with Evaluator(ProbeTask(), limit=2, limits=LIMITS, workers=2) as evaluator:
        evaluator.evaluate(SEED)
        server = psutil.Process(evaluator.sandbox.server_pid)

        def running() -> set[int]:
            return {child.pid for child in server.children()} - evaluator.sandbox.spare_pids()

        settled = time.monotonic() + 5
        while running() and time.monotonic() < settled:  # the seed's child, killed, not yet reaped
            time.sleep(0.01)
        batch = threading.Thread(target=evaluator.evaluate_many, args=(sleepers,))
        batch.start()
        most_at_once, deadline = 0, time.monotonic() + 5
        while batch.is_alive() and time.monotonic() < deadline:
            most_at_once = max(most_at_once, len(running()))
            time.sleep(0.01)
        batch.join()
    assert most_at_once == 2


def test_the_objective_is_the_tasks_own_and_the_reward_is_derived_once() -> None:
    """A maximising task's score is reported as it is; only `fitness_of` turns it into a reward."""
    with Evaluator(MaximisingProbe(), limits=LIMITS) as evaluator:
        result = evaluator.evaluate(SEED)
    assert result.objective == pytest.approx(float(np.mean(smallest_values())))
    assert fitness_of(result.objective, MaximisingProbe.sense) == result.objective
    assert fitness_of(result.objective, ProbeTask.sense) == -result.objective


def test_gap_uses_shipped_references(monkeypatch: pytest.MonkeyPatch) -> None:
    references = np.full(len(smallest_values()), 0.05)
    monkeypatch.setattr("coevo.evaluate.evaluator.group_references", lambda task, split, group: references)
    with Evaluator(ProbeTask(), limits=LIMITS) as evaluator:
        result = evaluator.evaluate(SEED)
    assert result.gap_pct == pytest.approx(gap_pct(smallest_values(), references))
    with Evaluator(MaximisingProbe(), limits=LIMITS) as evaluator:
        shortfall = evaluator.evaluate(SEED).gap_pct
    assert shortfall == pytest.approx(100 * (0.05 - np.mean(smallest_values())) / 0.05), "a maximum falls short"


def test_standard_library_helpers_work_in_the_sandbox(evaluator: Evaluator) -> None:
    code = (
        "import collections, enum, functools, heapq, itertools, math, statistics, operator, random\n"
        "import numpy as np\n\n"
        "class Colour(enum.Enum):\n    RED = 1\n\n"
        "class Pair:\n    def __init__(self, value, index):\n        self.value, self.index = value, index\n\n"
        "    def __lt__(self, other):\n        return self.value < other.value\n\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def square(x):\n    return x * x\n\n"
        "def pick(values):\n"
        "    pairs = [Pair(float(v), i) for i, v in enumerate(values)]\n"
        "    heapq.heapify(pairs)\n"
        "    assert math.isfinite(statistics.mean(values)) and np.random.default_rng(1).random() < 1\n"
        "    assert Colour(1) is Colour.RED and square(3) == 9 and collections.Counter('aab')['a'] == 2\n"
        "    return operator.attrgetter('index')(pairs[0])\n"
    )
    result = evaluator.evaluate(code)
    assert result.valid, result.reason
    assert result.per_instance == pytest.approx(smallest_values())


@pytest.mark.parametrize(
    "code",
    [
        "import collections\nP = collections.namedtuple('P', 'a b')\n",
        "from dataclasses import dataclass\n",
        "import typing\nclass P(typing.NamedTuple):\n    a: int\n",
    ],
)
def test_code_generating_helpers_are_refused_with_a_clear_reason(evaluator: Evaluator, code: str) -> None:
    result = evaluator.evaluate(code + "\ndef pick(values):\n    return 0\n")
    assert not result.valid and "generates code at run time" in result.reason


def test_channel_round_trips_plain_data_only() -> None:
    solution = {"tour": np.arange(5, dtype=np.int32), "cost": math.inf, "pair": (1, [2.5, None]), "note": 'naïve "x"'}
    wire = frame({"index": 0, "solution": encode_solution(solution), "at": 1.5}) + frame({"done": True})
    reader = FrameReader()
    first, done = reader.feed(wire[:7]) + reader.feed(wire[7:])  # frames split across reads
    assert first["index"] == 0 and first["at"] == 1.5 and done == {"done": True}
    decoded = decode_solution(first["solution"])
    assert decoded["tour"].dtype == np.int32 and decoded["tour"].tolist() == [0, 1, 2, 3, 4]
    assert decoded["cost"] == math.inf and decoded["pair"] == (1, [2.5, None]) and decoded["note"] == 'naïve "x"'
    with pytest.raises(InvalidSolution, match="contains a object"):
        encode_solution([object()])
    with pytest.raises(ChannelError):
        decode_solution({"pickle": "gASV..."})


def test_job_reaches_the_child_intact() -> None:
    job = Job.compile("def pick(values):\n    return len('naïve')  # non-ASCII\n", 256, 2.5, 4096)
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, job.encode())
        received = Job.read(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert received == job
    namespace: dict[str, object] = {}
    exec(marshal.loads(received.module), namespace)  # noqa: S102 - the test's own code
    assert namespace["pick"]([]) == 5


def test_code_that_cannot_compile_is_refused_before_any_child_starts() -> None:
    with pytest.raises(ValueError, match="surrogates not allowed"):
        Job.compile("def pick(values):\n    return 0  # \ud800\n", 256, 2.5, 4096)
    for static_check in (True, False):  # refused by the policy check, or else by the sandbox's compile step
        with Evaluator(ProbeTask(), limits=LIMITS, static_check=static_check) as evaluator:
            result = evaluator.evaluate("def pick(values):\n    return 0  # \ud800\n")
            assert evaluator.sandbox.server_pid is None  # no fork server was needed to refuse it
        assert not result.valid and result.reason.startswith("unparsable code: 'utf-8' codec can't encode")


def test_large_instance_sets_reach_every_child() -> None:
    task = LargeProbe()
    expected = [float(inst["values"].min()) for inst in task.groups("search")[0].instances]
    with Evaluator(task, limits=LIMITS, workers=2) as evaluator:
        results = evaluator.evaluate_many([SEED, SEED + "# twin\n"])
    assert [result.per_instance for result in results] == [pytest.approx(expected)] * 2


def test_progress_sent_before_a_deadline_counts_however_late_the_parent_reads_it() -> None:
    """The parent's backstop deadline (the candidate's limit and a grace) is judged by the
    driver's timestamps; the per-instance limit is the driver's to judge."""
    limits = Limits(instance_seconds=1.0, candidate_seconds=2.0)
    deadline = limits.candidate_seconds + _DEADLINE_GRACE_SECONDS
    solved = [{"loaded": True}, {"index": 0, "solution": 0, "at": 0.6}, {"index": 1, "solution": 1, "at": deadline - 0.1, "done": True}]
    on_time = supervise_late(solved, 2, limits)
    assert on_time.failure is None and on_time.solutions == (0, 1)
    # A solution sent past the deadline fails even when read late ...
    overran = supervise_late([*solved[:2], {"index": 1, "solution": 1, "at": deadline + 0.1, "done": True}], 2, limits)
    assert overran.failure == "exceeded the per-candidate time limit of 2 s after 1 of 2 instances"
    assert overran.failed_index == 1
    # ... and so does silence past it.
    stalled = supervise_late(solved[:2], 2, limits)
    assert stalled.failure == "exceeded the per-candidate time limit of 2 s after 1 of 2 instances"


def test_a_failure_names_the_instance_the_driver_names() -> None:
    """In lockstep a later instance can fail while earlier ones are still being built."""
    limits = Limits(instance_seconds=1.0, candidate_seconds=5.0)
    failed = supervise_late([{"loaded": True}, {"index": 0, "solution": 0, "at": 0.1}, {"index": 3, "invalid": "no"}], 4, limits)
    assert failed.failure == "no" and failed.failed_index == 3
    out_of_range = supervise_late([{"loaded": True}, {"index": 9, "invalid": "no"}], 4, limits)
    assert out_of_range.failure == "no" and out_of_range.failed_index == 0


def test_a_child_that_keeps_its_channel_open_is_read_long_before_any_deadline() -> None:
    """The supervisor wakes on the child's hang-up, not per message; it must still drain the
    channel on its own, or a child that never hangs up (or waits on a full channel) would be
    read only at a deadline."""
    limits = Limits(instance_seconds=30.0, candidate_seconds=60.0)
    messages = [{"loaded": True}, {"index": 0, "solution": 7, "at": 10.0, "done": True}]
    start = time.monotonic()
    outcome = supervise_late(messages, 1, limits)
    assert outcome.failure is None and outcome.solutions == (7,)
    assert time.monotonic() - start < 5.0


def test_a_window_longer_than_the_instance_limit_passes_when_each_instance_is_within_it() -> None:
    """The per-instance limit holds each instance to its own time: once the child has marked the
    window's instances done, reading its long reply is not charged from the window's start."""
    task = SlowWindowProbe()
    limits = Limits(instance_seconds=3 * task.SECONDS, candidate_seconds=30.0)
    with Evaluator(task, limits=limits) as evaluator:
        result = evaluator.evaluate(SEED)
    assert result.valid, result.reason
    assert result.seconds > limits.instance_seconds  # the window as a whole ran past the limit
    assert result.per_instance == pytest.approx([float(i["values"].min()) for i in task.groups("search")[0].instances])


def test_bad_arguments_fail_clearly() -> None:
    with pytest.raises(ValueError, match="parallel must be at least 1"):
        Sandbox(ProbeTask(), InstancePayload.of([]), parallel=0)
    with pytest.raises(ValueError, match="limits must be positive"):
        Limits(instance_seconds=0)
    for seconds in (math.nan, math.inf):
        with pytest.raises(ValueError, match="time limits must be finite"):
            Limits(candidate_seconds=seconds)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        Evaluator(ProbeTask(), limit=0)
    with pytest.raises(KeyError, match="unknown task"):
        Evaluator("no_such_task")


def _seeded_tasks() -> list[str]:
    names = []
    for name in TASK_NAMES:
        try:
            get_task(name).seed_code()
        except (ImportError, NotImplementedError, OSError):
            continue
        names.append(name)
    return names


@pytest.mark.parametrize("name", _seeded_tasks())
def test_every_task_seed_runs_in_the_sandbox(name: str) -> None:
    """The guards must not break real tasks: each seed heuristic is valid on one instance."""
    with Evaluator(name, limit=1, limits=Limits(instance_seconds=60, candidate_seconds=120)) as evaluator:
        result = evaluator.evaluate(evaluator.task.seed_code())
    assert result.valid, result.reason
    assert result.n_instances == 1 and math.isfinite(result.objective)


def test_default_limits_follow_the_task_and_the_split_size():
    with Evaluator("bpp_aco", "search") as search, Evaluator("kp_construct", "search", limit=4) as small:
        assert search.limits.instance_seconds == get_task("bpp_aco").instance_seconds
        assert search.limits.candidate_seconds == search.limits.instance_seconds * search.n_instances / 2
        assert small.limits.instance_seconds == get_task("kp_construct").instance_seconds
        assert small.limits.candidate_seconds == small.limits.instance_seconds * 4 / 2
