"""The Ray executor: members played on a two-node local cluster end where the local run ends, bit for bit,
even when a worker or the driver is killed with SIGKILL mid-run.

The replica a worker holds is tested without Ray first; the cluster tests skip when the `ray` extra is
absent, and are slow ones (a cluster and several runs each). Agent runs use the terse tiny random Llama
agent (`tiny_lm:build_terse_tiny_agent`), heuristic-design runs the weight-sensitive scripted LLM
(`scripted_llm:build`), so a run takes seconds on an idle machine. A heuristic-design run without ES (`eoh`)
writes on the driver and scores every heuristic in the workers' sandboxes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_resume import CONFIG as AHD_CONFIG
from test_resume import coevo, committed_steps, how_it_ended, show
from tiny_lm import build_terse_tiny_agent

from coevo.candidate import WeightsRef
from coevo.cli import main
from coevo.run.config import load_config, validate
from coevo.run.executor import LocalExecutor
from coevo.run.member_replica import MemberReplica, StaleReplica
from coevo.run.ray_executor import RayExecutor
from coevo.run.runner import Runner, summary
from coevo.run.session import load_llm, start_run
from coevo.run.store import RunStore
from coevo.run.validation import validate_best
from coevo.workload import Member

TESTS = Path(__file__).resolve().parent
CONFIG = """
method = "es"
model = "tiny_lm:build_terse_tiny_agent"
budget = {budget}
seed = 3
population_size = 4
[es]
sigma = 0.5
alpha = 0.1
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = 2
heldout_episodes = 2
"""
needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="the ray extra is not installed: make ray"
)


def write_config(tmp_path: Path, budget: int, kind: str = "agent") -> Path:
    """The agent run, or the heuristic-design run the resume tests kill with method `kind`, at `budget`."""
    path = tmp_path / f"{kind}-{budget}.toml"
    if kind == "agent":
        path.write_text(CONFIG.format(budget=budget))
    else:
        path.write_text(AHD_CONFIG.format(method=kind).replace("budget = 34", f"budget = {budget}"))
    return path


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory) -> dict[tuple[str, int], dict]:
    """The undisturbed local run of each workload and budget, as `coevo runs show --json` reports it (cached)."""
    return {}


def local_run(local_runs: dict[tuple[str, int], dict], tmp_path: Path, budget: int, kind: str = "agent") -> dict:
    if (kind, budget) not in local_runs:
        run_dir = tmp_path / f"local-{kind}-{budget}"
        finished = coevo("run", str(write_config(tmp_path, budget, kind)), "--run-dir", str(run_dir))
        assert finished.returncode == 0, finished.stderr
        local_runs[kind, budget] = outcome(run_dir)
    return local_runs[kind, budget]


def outcome(run_dir: Path) -> dict:
    """A run's `coevo runs show --json`, every ES member's reward and every candidate's verdict."""
    store = RunStore.open(run_dir)
    try:
        return show(run_dir) | {
            "rewards": [(r.seeds, r.raw_rewards) for r in store.es_records()],
            "candidates": [(c.code, c.fitness, c.objective, c.reason) for _, c in store.candidates()],
        }
    finally:
        store.close()


def assert_ends_as(run_dir: Path, expected: dict) -> None:
    """The run finished with the local run's weights, every member earned the same reward and every
    candidate the same verdict."""
    actual = outcome(run_dir)
    assert actual["status"] == "finished"
    assert actual["weights_sha256"] == expected["weights_sha256"]
    assert actual["rewards"] == expected["rewards"]
    assert actual["candidates"] == expected["candidates"]
    assert actual["best"] == expected["best"] and actual["evaluations"] == expected["evaluations"]


# --- without Ray ---------------------------------------------------------------------------------------
def test_a_replica_synced_by_history_lines_plays_members_as_the_driver_does(tmp_path: Path, one_torch_thread):
    """The worker's side alone: history lines move its weights to the driver's, and member i played alone
    equals member i of the driver's whole generation."""
    config = load_config(write_config(tmp_path, 8))
    with start_run(config, tmp_path / "driver", build_terse_tiny_agent()) as runner:
        runner.run()
        lines = [r.to_json() for r in runner.store.es_records()]
        members = [Member("", WeightsRef.of(config.model, 2, p)) for p in runner.engine.ask()]
        driver_view = runner.workload.at_generation(3).evaluate(members, traces=True)
        driver_sha = runner.weights_sha256()
    replica = MemberReplica(config.model_dump(mode="json"))
    assert len(lines) == 2 and replica.weights_sha256() != driver_sha
    with pytest.raises(StaleReplica, match="holds 1 ES updates"):  # one line short of the members' step
        replica.play(lines[:1], 3, 2, members[2], True)
    with pytest.raises(StaleReplica, match="holds 1 ES updates"):  # a gap in the lines it is sent
        replica.play(lines[2:], 3, 2, members[2], True)
    played = replica.play(lines, 3, 2, members[2], True)  # the line it already holds is skipped
    assert replica.weights_sha256() == driver_sha
    assert played.rewards == driver_view[2].rewards and played.trajectories == driver_view[2].trajectories
    assert replica.play([], 3, 0, members[0], True).trajectories == driver_view[0].trajectories
    assert driver_view[0].trajectories != driver_view[2].trajectories, "members differ, or the test proves nothing"


AHD = {
    "task": "tsp_construct",
    "model": "scripted_llm:build",
    "budget": 19,
    "seed": 3,
    "population_size": 4,
    "eval": {"limit": 4, "workers": 1},
}


class ReplicaExecutor(LocalExecutor):
    """The Ray executor's worker side in this process: every AHD ES member written and scored by one replica
    that only the history lines move on, every other heuristic scored by it as the driver's workload names it."""

    def __init__(self, config) -> None:
        self.replica = MemberReplica(config.model_dump(mode="json"))
        self.proposed = 0
        self.scored = 0

    def propose(self, jobs, *, generation, history):
        self.proposed += len(jobs)
        return [self.replica.propose([r.to_json() for r in history(0)], job) for job in jobs]

    def score(self, workload, members, *, generation, history):
        self.scored += len(members)
        return [self.replica.score(code) for code in workload.codes(members)]


def refuse(*args, **kwargs):
    raise AssertionError("called where it must not be")


def stored(store: RunStore) -> dict:
    """What a run stored: its summary, every LLM answer with its weights, every verdict, its LLM requests."""
    ledger = store.last_state()["ledger"]
    return summary(store) | {
        "calls": [(c["step"], c["weights"], c["response"]) for c in store.llm_calls()],
        "candidates": [(c.code, c.fitness, c.reason, c.weights) for _, c in store.candidates()],
        "requests": {op: usage["requests"] for op, usage in ledger["scripted"].items()},
    }


@pytest.mark.parametrize(
    ("method", "es"),
    [("sample+es", {}), ("eoh+es", {"rank": 1, "scope": "all_linear"}), ("coevo", {})],
    ids=["full", "lowrank", "prompt-variants"],
)
def test_ahd_members_written_and_scored_by_a_replica_equal_the_drivers(tmp_path: Path, method: str, es: dict):
    settings = {"batch": 6} if method == "sample+es" else {}
    config = validate({**AHD, "method": method, "es": {"sigma": 0.05, "alpha": 0.05, **es}, "settings": settings})
    with start_run(config, tmp_path / "local") as local:
        local.run()
        expected = stored(local.store)
    executor = ReplicaExecutor(config)
    store = RunStore.create(tmp_path / "replica", config.model_dump(mode="json"))
    with Runner(config, store, tmp_path / "replica", load_llm(config), executor=executor) as remote:
        remote.run()
        actual = stored(remote.store)
        members = [c.weights for _, c in remote.store.candidates() if c.weights is not None]
        updates = len(remote.store.es_records())
    assert actual == expected
    assert executor.proposed == sum(w.seed is not None for w in members) > 0
    assert executor.replica.step == updates - 1 > 0, "the last members wrote under the weights before the last update"
    assert len({fitness for _, fitness, *_ in expected["candidates"]}) > 2, "members differ, or the test proves nothing"


def test_a_replica_that_only_scores_loads_no_model_and_gives_the_drivers_verdicts(tmp_path: Path, monkeypatch):
    """`eoh` writes on the driver: its workers hold the sandbox alone, and scoring there changes no verdict."""
    config = validate({**AHD, "method": "eoh"})
    with start_run(config, tmp_path / "local") as local:
        local.run()
        expected = stored(local.store)
    monkeypatch.setattr("coevo.run.build.load_llm", refuse)
    executor = ReplicaExecutor(config)
    assert executor.replica.host is None and executor.replica.operators is None
    store = RunStore.create(tmp_path / "replica", config.model_dump(mode="json"))
    with Runner(config, store, tmp_path / "replica", load_llm(config), executor=executor) as remote:
        monkeypatch.setattr(remote.workload.evaluator, "evaluate_many", refuse)  # the driver's sandbox
        remote.run()
        actual = stored(remote.store)
    assert actual == expected
    assert executor.scored == sum(bool(code) for code, *_ in actual["candidates"]) > 0 and executor.proposed == 0
    assert len({fitness for _, fitness, *_ in expected["candidates"]}) > 2, (
        "verdicts differ, or the test proves nothing"
    )


def test_an_unknown_or_uninstalled_executor_is_refused_in_one_line_before_anything_loads(
    tmp_path: Path, capsys, monkeypatch
):
    config = write_config(tmp_path, 8)
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r"), "--executor", "spark"]) == 2
    assert (
        "unknown executor 'spark'; known executors: local, ray (or name one as path/to/file.py:Class"
        in capsys.readouterr().err
    )
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r"), "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "coevo: error: --executor ray needs the ray extra: make ray (or pip install -e '.[ray]' -c constraints.txt)"
    )
    assert not (tmp_path / "r" / "run.sqlite").exists()


@needs_ray
def test_a_cluster_address_nobody_listens_on_exits_2_before_anything_loads(tmp_path: Path, capsys):
    config = write_config(tmp_path, 8)
    nobody = ["--executor", "ray", "--address", "127.0.0.1:1"]
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r"), *nobody]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("coevo: error: cannot reach the Ray cluster at 127.0.0.1:1: ") and "\n" not in err
    assert not (tmp_path / "r").exists()


@needs_ray
@pytest.mark.slow
def test_starting_a_local_ray_instance_prints_no_token_auth_notice(tmp_path: Path):
    """Ray announces on every ray.init that it kept token authentication on; coevo keeps it on, quietly."""
    config = write_config(tmp_path, 8)
    code = (
        "import ray, pathlib; from coevo.run.config import load_config; from coevo.run.ray_executor import RayExecutor; "
        f"RayExecutor(load_config(pathlib.Path({str(config)!r})), workers=1); ray.shutdown()"
    )
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    env |= {"RAY_TMPDIR": ray_dir, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))}
    try:
        started = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert started.returncode == 0, started.stderr
    assert "Token authentication" not in started.stderr


def test_importing_coevo_does_not_import_ray():
    code = "import sys, coevo.cli, coevo.run.session, coevo.run.ray_executor; print('ray' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# --- on a two-node local cluster -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    """A head and a second node, one CPU each, started and stopped here; workers import tests/ modules."""
    pytest.importorskip("ray", reason="the ray extra is not installed: make ray")
    from ray.cluster_utils import Cluster

    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), previous]))
    node = {"num_cpus": 1, "object_store_memory": 80 * 1024**2}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    try:
        yield cluster.address
    finally:
        cluster.shutdown()
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


def ray_run(*args: str, address: str, wait: bool = True):
    return coevo(*args, "--executor", "ray", "--address", address, wait=wait)


@needs_ray
@pytest.mark.slow
def test_a_run_through_ray_equals_the_local_run_bit_for_bit(cluster: str, local_runs, tmp_path: Path):
    expected = local_run(local_runs, tmp_path, 8)
    finished = ray_run("run", str(write_config(tmp_path, 8)), "--run-dir", str(tmp_path / "ray"), address=cluster)
    assert finished.returncode == 0, finished.stderr
    assert_ends_as(tmp_path / "ray", expected)
    assert len(expected["rewards"]) == 2 and len({r for _, rs in expected["rewards"] for r in rs}) > 1
    assert "trained (2 ES updates) success on val" in finished.stdout


def ray_run_into_generations(
    tmp_path: Path, run_dir: Path, address: str, budget: int = 16, kind: str = "agent"
) -> subprocess.Popen:
    """A run of several generations on the cluster, returned once its first two steps committed."""
    config = write_config(tmp_path, budget, kind)
    driver = ray_run("run", str(config), "--run-dir", str(run_dir), address=address, wait=False)
    while committed_steps(run_dir) < 2:
        assert driver.poll() is None, f"the run ended before it could be disturbed ({how_it_ended(driver)})"
        time.sleep(0.02)
    return driver


def kill_a_playing_worker(driver: subprocess.Popen, timeout: float = 180, task: str = "MemberReplica.play") -> int:
    """SIGKILL a worker process while it runs `task` for a member; returns its pid."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and driver.poll() is None:
        for process in psutil.process_iter(["pid", "cmdline"]):
            if any(task in part for part in process.info["cmdline"] or ()):
                os.kill(process.info["pid"], signal.SIGKILL)
                return process.info["pid"]
        time.sleep(0.01)
    raise AssertionError("no worker was seen playing a member before the run ended")


@needs_ray
@pytest.mark.slow
def test_a_worker_killed_mid_generation_has_its_member_replayed(cluster: str, local_runs, tmp_path: Path):
    expected = local_run(local_runs, tmp_path, 16)
    run_dir = tmp_path / "ray"
    driver = ray_run_into_generations(tmp_path, run_dir, cluster)
    kill_a_playing_worker(driver)
    assert driver.wait(timeout=300) == 0, how_it_ended(driver)
    assert_ends_as(run_dir, expected)


@needs_ray
@pytest.mark.slow
def test_a_driver_killed_mid_run_resumes_on_ray_to_the_same_weights(cluster: str, local_runs, tmp_path: Path):
    expected = local_run(local_runs, tmp_path, 16)
    run_dir = tmp_path / "ray"
    driver = ray_run_into_generations(tmp_path, run_dir, cluster)
    time.sleep(0.1)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert show(run_dir)["status"] != "finished"
    resumed = ray_run("resume", str(run_dir), address=cluster)
    assert resumed.returncode == 0, resumed.stderr
    assert_ends_as(run_dir, expected)


@needs_ray
@pytest.mark.slow
def test_an_ahd_es_run_through_ray_equals_the_local_run_bit_for_bit(cluster: str, local_runs, tmp_path: Path):
    """Workers write each ES member's heuristic under its perturbation and score it in their own sandbox."""
    expected = local_run(local_runs, tmp_path, 26, "eoh+es")
    config = write_config(tmp_path, 26, "eoh+es")
    finished = ray_run("run", str(config), "--run-dir", str(tmp_path / "ray"), address=cluster)
    assert finished.returncode == 0, finished.stderr
    assert_ends_as(tmp_path / "ray", expected)
    assert expected["evaluations"] == 26 and expected["best"] is not None and len(expected["rewards"]) >= 2


@needs_ray
@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "task"),
    [("eoh+es", "MemberReplica.propose"), ("eoh", "MemberReplica.score")],
    ids=["writing", "scoring"],
)
def test_an_ahd_worker_killed_mid_generation_has_its_job_done_again(
    cluster: str, local_runs, tmp_path: Path, method: str, task: str
):
    """An ES member is written and scored again, a heuristic written on the driver scored again."""
    expected = local_run(local_runs, tmp_path, 26, method)
    run_dir = tmp_path / "ray"
    driver = ray_run_into_generations(tmp_path, run_dir, cluster, 26, method)
    kill_a_playing_worker(driver, task=task)
    assert driver.wait(timeout=300) == 0, how_it_ended(driver)
    assert_ends_as(run_dir, expected)


@needs_ray
@pytest.mark.slow
def test_an_eoh_run_through_ray_equals_the_local_run(cluster: str, local_runs, tmp_path: Path):
    """No ES: the driver writes every heuristic and the workers' sandboxes score them."""
    expected = local_run(local_runs, tmp_path, 26, "eoh")
    finished = ray_run(
        "run", str(write_config(tmp_path, 26, "eoh")), "--run-dir", str(tmp_path / "ray"), address=cluster
    )
    assert finished.returncode == 0, finished.stderr
    assert_ends_as(tmp_path / "ray", expected)
    assert expected["evaluations"] == 26 and len({fitness for _, fitness, *_ in expected["candidates"]}) > 2


@needs_ray
@pytest.mark.slow
def test_eoh_heuristics_are_scored_on_both_nodes_and_never_by_the_drivers_sandbox(
    cluster: str, local_runs, tmp_path: Path, monkeypatch
):
    import ray

    def worker_view(replica: MemberReplica) -> tuple[str, int, bool]:
        """On a worker (pickled by value): its node, its pid, and whether it holds a model."""
        model = replica.host is not None or replica.operators is not None
        return ray.get_runtime_context().get_node_id(), os.getpid(), model

    expected = local_run(local_runs, tmp_path, 26, "eoh")
    config = load_config(write_config(tmp_path, 26, "eoh"))
    run_dir = tmp_path / "in-process"
    executor = RayExecutor(config, cluster)
    try:
        store = RunStore.create(run_dir, config.model_dump(mode="json"))
        with Runner(config, store, run_dir, load_llm(config), executor=executor) as runner:
            monkeypatch.setattr(runner.workload.evaluator, "evaluate_many", refuse)
            runner.run()
            validate_best(runner)  # as `coevo run` does: the answer is chosen on val
            views = ray.get([actor.__ray_call__.remote(worker_view) for actor in executor.actors])
    finally:
        ray.shutdown()
    assert_ends_as(run_dir, expected)
    assert len({node for node, _, _ in views}) == 2 and os.getpid() not in {pid for _, pid, _ in views}
    assert not any(model for _, _, model in views), "a worker that only scores loaded the model"
    assert min(executor.finished) > 0 and sum(executor.finished) > 2, "ray.wait fed one worker only"


@needs_ray
@pytest.mark.slow
def test_plugins_from_files_run_through_ray_as_they_run_locally(cluster: str, tmp_path: Path):
    """Workers import the user's files by the config's absolute spec: an environment under es, a task under eoh."""
    from test_plugins import COUNTER_ENV, MY_TSP

    (tmp_path / "count.py").write_text(COUNTER_ENV)
    (tmp_path / "my_tsp.py").write_text(MY_TSP)
    agent = CONFIG.format(budget=8).replace('env = "gridnav"\nhorizon = 2', f'env = "{tmp_path / "count.py"}:CountTo"')
    ahd = write_config(tmp_path, 14, "eoh").read_text().replace('"tsp_construct"', f'"{tmp_path / "my_tsp.py"}:MyTSP"')
    assert main(["new", "task", "load_balance", "--dir", str(tmp_path)]) == 0  # and the problem `coevo new task` writes
    scaffolded = ahd.replace(
        f'"{tmp_path / "my_tsp.py"}:MyTSP"', f'"{tmp_path / "load_balance" / "problem.py"}:LoadBalance"'
    )
    for name, text in (("agent", agent), ("ahd", ahd), ("scaffolded", scaffolded)):
        config = tmp_path / f"plugin-{name}.toml"
        config.write_text(text)
        local = coevo("run", str(config), "--run-dir", str(tmp_path / f"local-{name}"))
        assert local.returncode == 0, local.stderr
        remote = ray_run("run", str(config), "--run-dir", str(tmp_path / f"ray-{name}"), address=cluster)
        assert remote.returncode == 0, remote.stderr
        assert_ends_as(tmp_path / f"ray-{name}", outcome(tmp_path / f"local-{name}"))
