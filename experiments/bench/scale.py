"""Scale-out through the Ray executor: what seed-only sync sends, and what a second worker buys.

Usage: python experiments/bench/scale.py [--json] [--quick] [--model NAME]

The figures are SmolLM2-135M's; --quick plays the tests' tiny random agent instead (minutes, not an hour).

Figures (targets in TARGETS):
- seed_sync_bytes_ratio: bytes the driver sends per ES generation with seed-only sync (every job as
  pickled for `ray`: member index, ES step, seed, sign, sigma, plus the history line each worker lacks)
  over a full-weight broadcast as ES-at-Scale does it (the same jobs, plus the pickled evolved weights
  to every worker every generation). Both are pickled payload sizes, measured, not counted parameters.
- two_worker_speedup: members per second of an ES generation on 2 single-threaded Ray workers over 1.
  Two runs of the same config (one per side) advance a generation each, side after side (`rounds.py`),
  so both see the same machine load and play the very same members; the median per-round ratio, with
  its range.
- A simulated table for 8 to 1024 workers: generation time and bytes per generation for a population of
  4 members per worker, member times lognormal around the measured median member time (sigma 0.5 of the
  log: a few members take twice the median, one in a hundred three times), dynamic scheduling (a member
  goes to the first free worker, as `ray.wait` does) against a static split of members to workers, means
  over 20 simulated generations. Bytes scale the measured job and history-line sizes: a line lists
  every member, and every worker receives it, so seed-only bytes grow as members x workers, while a
  full-weight broadcast grows as workers x model size.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rounds import alternate, ratio_summary, target_line

TARGETS: dict[str, tuple[str, float]] = {"two_worker_speedup": (">=", 1.7), "seed_sync_bytes_ratio": ("<", 0.01)}
FULL_MODEL = "smollm2-135m"
QUICK_MODEL = "tiny_lm:build_terse_tiny_agent"
"""--quick's stand-in: the tests' random tiny Llama (milliseconds a turn), so its bytes ratio is a tiny
model's and its speedup mostly measures the scheduling overhead."""
STRAGGLER_SIGMA = 0.5
"""Spread of the log of a member's time in the simulation."""
SIM_WORKERS = (8, 16, 32, 64, 128, 256, 512, 1024)
MEMBERS_PER_WORKER = 4
SIM_DRAWS = 20


def agent_config(model: str, population: int, episodes: int, generations: int):
    from coevo.run.config import validate

    return validate(
        {
            "method": "es",
            "model": model,
            "budget": population * generations,
            "seed": 0,
            "population_size": population,
            "es": {"sigma": 1e-3, "alpha": 5e-4},
            "workload": {
                "kind": "agent",
                "env": "gridnav",
                "horizon": 2,
                "episodes": episodes,
                "heldout_episodes": 1,
            },
        }
    )


def open_runner(config, run_dir: Path, workers: int):
    """A run of `config` whose members play on `workers` Ray actors; generation 0 (held-out) is done."""
    from coevo.run.ray_executor import RayExecutor
    from coevo.run.runner import Runner
    from coevo.run.session import load_llm
    from coevo.run.store import RunStore

    store = RunStore.create(run_dir, config.model_dump(mode="json"))
    executor = RayExecutor(config, workers=workers)
    runner = Runner(config, store, run_dir, load_llm(config), executor=executor)
    runner.run_step()
    return runner


def timed_generation(runner) -> float:
    """Members per second of the runner's next ES generation."""
    started = time.perf_counter()
    runner.run_step()
    return runner.config.population_size / (time.perf_counter() - started)


def weights_payload_bytes(runner) -> int:
    """Pickled size of the evolved weights, what a full-weight broadcast sends each worker."""
    from coevo.es.host import select_parameters

    module = runner.host.module
    return len(pickle.dumps({name: p.detach() for name, p in select_parameters(module, runner.host.scope)}))


def simulate(workers: int, member_seconds: float, job_bytes: float, line_bytes: float, weights_bytes: int, rng):
    """Generations of 4 members per worker under the lognormal straggler model (means over SIM_DRAWS).

    `line_bytes` is one history line's size per member (a line lists every member's seed and coefficient),
    `job_bytes` a job's size without its lines."""
    members = MEMBERS_PER_WORKER * workers
    dynamic, static = [], []
    for _ in range(SIM_DRAWS):
        times = member_seconds * rng.lognormal(0.0, STRAGGLER_SIGMA, members)
        free = [0.0] * workers
        for seconds in times:  # dynamic: the next member goes to the first free worker
            heapq.heappush(free, heapq.heappop(free) + seconds)
        dynamic.append(max(free))
        static.append(float(times.reshape(workers, MEMBERS_PER_WORKER).sum(axis=1).max()))
    seed_only = members * job_bytes + workers * members * line_bytes  # every worker gets the new line
    return {
        "workers": workers,
        "members": members,
        "dynamic_seconds": statistics.mean(dynamic),
        "static_seconds": statistics.mean(static),
        "seed_only_bytes": seed_only,
        "full_weight_bytes": members * job_bytes + workers * weights_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer members and rounds (a few minutes)")
    parser.add_argument("--model", help=f"the model every replica holds (default {FULL_MODEL}; --quick: {QUICK_MODEL})")
    args = parser.parse_args()
    args.model = args.model or (QUICK_MODEL if args.quick else FULL_MODEL)
    tests = str(Path(__file__).resolve().parents[2] / "tests")  # where the quick stand-in lives
    sys.path.insert(0, tests)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))  # workers
    import ray

    population, episodes, rounds = (8, 2, 3) if args.quick else (8, 2, 6)
    config = agent_config(args.model, population, episodes, generations=rounds + 2)
    ray.init(num_cpus=3, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    with tempfile.TemporaryDirectory() as scratch:
        one, two = (open_runner(config, Path(scratch) / f"w{w}", w) for w in (1, 2))
        timed_generation(one), timed_generation(two)  # warm-up: replicas loaded, first history line sent
        before = two.executor.sent_bytes
        samples = alternate({"one": lambda: timed_generation(one), "two": lambda: timed_generation(two)}, rounds)
        seed_bytes = (two.executor.sent_bytes - before) / rounds
        weights_bytes = weights_payload_bytes(two)
        records = two.store.es_records()
        assert one.weights_sha256() == two.weights_sha256(), "both sides played the same members"
        one.close(), two.close()
    ray.shutdown()
    member_seconds = 1 / statistics.median(samples["one"])  # one worker plays its members one by one
    line_bytes = len(pickle.dumps(records[-1].to_json()))
    job_bytes = (seed_bytes - 2 * line_bytes) / population  # each of the 2 workers got one new line
    line_bytes /= population
    figures = {
        "seed_sync_bytes_ratio": seed_bytes / (seed_bytes + 2 * weights_bytes),
        "seed_only_bytes_per_generation": seed_bytes,
        "full_weight_bytes_per_generation": seed_bytes + 2 * weights_bytes,
        **ratio_summary("two_worker_speedup", samples["two"], samples["one"]),
        "members_per_second_one_worker": statistics.median(samples["one"]),
        "median_member_seconds": member_seconds,
    }
    rng = np.random.default_rng(0)
    table = [simulate(w, member_seconds, job_bytes, line_bytes, weights_bytes, rng) for w in SIM_WORKERS]
    if args.json:
        print(json.dumps({**figures, "simulation": table, "model": args.model, "quick": args.quick}))
        return
    for name, value in figures.items():
        print(target_line(name, value, TARGETS))
    print(f"\nsimulated generation, {MEMBERS_PER_WORKER} members per worker, lognormal sigma {STRAGGLER_SIGMA}:")
    print(f"{'workers':>8} {'dynamic s':>10} {'static s':>10} {'seed-only B':>12} {'full-weight B':>14}")
    for row in table:
        print(
            f"{row['workers']:>8} {row['dynamic_seconds']:>10.3g} {row['static_seconds']:>10.3g}"
            f" {row['seed_only_bytes']:>12.4g} {row['full_weight_bytes']:>14.4g}"
        )


if __name__ == "__main__":
    sys.exit(main())
