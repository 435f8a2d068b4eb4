"""Agent-workload ES speed on the embedded SmolLM2-135M (fp32, this CPU): issue 12's figures, and with
--speedup issue 32's: one agent ES generation on today's code over the same generation before it.

Usage: python experiments/bench/agents.py [--json] [--quick] [--speedup [--baseline-rev REV]]

--speedup runs one full-rank ES generation (N members, each playing E gridnav episodes under its own
weights, every turn with the agent's sampling) in two worker processes: one on this tree, one on a
git worktree of BASELINE_REV (transformers' `generate`, 64 tokens a turn, no stop at the end of the
action). Rounds alternate the sides; `agent_generation` is the median per-round ratio of baseline
seconds over this tree's seconds with the compute dtype chosen from the CPU, `agent_generation_fp32`
the same with fp32 forced (the same runs where the CPU has no native bf16). Each ratio is split, per
round, into `<figure>_reply_tokens` (tokens the baseline decoded over this tree's: the shorter replies)
and `<figure>_per_token` (this tree's tokens/s over the baseline's), whose product it is; and
`<figure>_same_moves` counts the episodes in which both sides made the same moves (each side's action
texts replayed through this tree's environment, compared by the feedback each move got), with
`<figure>_differing_moves` naming the others. It writes them into experiments/evidence/results.json
under "speedup", keeping the file's other keys.

Figures (targets in TARGETS), all on the same gridnav episodes (N members x E search seeds):
- episode_throughput_ratio: episodes/s of one low-rank ES generation (ask, every turn of every
  member's episodes decoded in one batch with row k under its member's perturbation, tell) over
  episodes/s of plain batched inference on the same N x E episodes (one rollout, live weights).
- es_generation_over_inference: seconds of one full-rank ES generation (ask, each member's E episodes
  under `perturbed()` in turn, tell) over seconds of the same N rollouts of E episodes, unperturbed.
Both sides of a ratio alternate in short rounds (`rounds.py`); a figure is the median per-round ratio,
with the range as `<figure>_min` and `<figure>_max`. Sampling is the agent's (seeded per episode and
turn), capped at `max_new_tokens` per turn, so both sides decode the same prompts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from rounds import alternate, ratio_summary, target_line

import coevo
from coevo.candidate import WeightsRef
from coevo.es.engine import ESConfig, ESEngine
from coevo.llm.base import AGENT_SAMPLING
from coevo.llm.hf import HFBackend
from tasks.agents import llm_policy, make_env, rollout
from tasks.agents.splits import split_seeds

TARGETS: dict[str, tuple[str, float]] = {
    "episode_throughput_ratio": (">=", 0.8),
    "es_generation_over_inference": ("<=", 1.10),
}
ENV, HORIZON = "gridnav", 2
SIGMA, ALPHA = 1e-3, 5e-4  # the reference's sigma_0 and step size (Agentic ESOpt, Zheng et al.)
BASELINE_REV = "38c808534caa9df969145934f611756618a748bc"
"""The last commit before the compute dtype choice, the stop at the end of a one-line action and the lean
decode loop: "today's" path of issue 32."""
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments" / "evidence"))
from evidence_file import RESULTS, merge, read  # noqa: E402  (the evidence folder is not a package)


def _workload_classes() -> tuple[type, type]:
    """AgentWorkload and Member from the coevo first on the path. --speedup's baseline revision kept them
    in `coevo.agents` and `coevo.workload`; asking that tree for `coevo.workloads` would get this tree's
    modules from the editable install, mixed with the baseline's, so the folder that exists decides."""
    if (Path(coevo.__file__).parent / "workloads").is_dir():
        from coevo.workload import Member
        from coevo.workloads.agents import AgentWorkload
    else:
        from coevo.agents import AgentWorkload
        from coevo.workload import Member
    return AgentWorkload, Member


AgentWorkload, Member = _workload_classes()


@dataclass(frozen=True)
class Settings:
    """Run size: --quick only checks that everything runs."""

    members: int
    episodes: int
    rounds: int
    max_new_tokens: int

    @classmethod
    def of(cls, quick: bool) -> Settings:
        if quick:
            return cls(members=2, episodes=2, rounds=1, max_new_tokens=8)
        return cls(members=4, episodes=4, rounds=3, max_new_tokens=24)


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


class Generation:
    """One ES generation on the agent workload: ask N members, play their episodes, tell the rewards."""

    def __init__(self, llm: HFBackend, rank: int, settings: Settings) -> None:
        scope = "all_linear" if rank else "full"
        host = llm.weights_host(scope, rank)
        self.engine = ESEngine(ESConfig(population_size=settings.members, sigma=SIGMA, alpha=ALPHA), host)
        sampling = replace(AGENT_SAMPLING, max_new_tokens=settings.max_new_tokens)
        seeds = tuple(split_seeds("search")[: settings.episodes])
        self.workload = AgentWorkload(llm, ENV, HORIZON, seeds, host=host, sampling=sampling)

    def __call__(self) -> None:
        members = self.engine.ask()
        refs = [WeightsRef.of("smollm2-135m", self.engine.step, p) for p in members]
        evaluations = self.workload.evaluate([Member("", ref) for ref in refs])
        self.engine.tell(members, [e.reward for e in evaluations])


def plain_rollouts(llm: HFBackend, settings: Settings, together: bool) -> Callable[[], None]:
    """The same N x E episodes on the live weights: one rollout of all of them, or N rollouts of E."""
    sampling = replace(AGENT_SAMPLING, max_new_tokens=settings.max_new_tokens)
    seeds = split_seeds("search")[: settings.episodes]
    policy = llm_policy(llm, sampling)

    def run() -> None:
        if together:
            rollout(ENV, seeds * settings.members, policy, horizon=HORIZON)
        else:
            for _ in range(settings.members):
                rollout(ENV, seeds, policy, horizon=HORIZON)

    return run


def measure(settings: Settings) -> dict[str, float]:
    llm = HFBackend.load("smollm2-135m", max_batch_size=settings.members * settings.episodes)
    episodes = settings.members * settings.episodes
    lowrank, fullrank = Generation(llm, 1, settings), Generation(llm, 0, settings)
    plain_together, plain_in_turn = plain_rollouts(llm, settings, True), plain_rollouts(llm, settings, False)
    plain_together()  # warm-up
    seconds = alternate(
        {
            "plain_batched": lambda: timed(plain_together),
            "es_lowrank": lambda: timed(lowrank),
            "plain_per_member": lambda: timed(plain_in_turn),
            "es_fullrank": lambda: timed(fullrank),
        },
        settings.rounds,
    )
    return {
        "members": settings.members,
        "episodes_per_member": settings.episodes,
        "plain_batched_episodes_per_s": episodes / min(seconds["plain_batched"]),
        "es_lowrank_episodes_per_s": episodes / min(seconds["es_lowrank"]),
        **ratio_summary("episode_throughput_ratio", seconds["plain_batched"], seconds["es_lowrank"]),
        **ratio_summary("es_generation_over_inference", seconds["es_fullrank"], seconds["plain_per_member"]),
    }


# --- issue 32: an agent ES generation, today's code over the baseline's ---------------------------------


def run_worker(members: int, episodes: int, dtype: str | None) -> None:
    """Serve one ES generation per line read from stdin, answering {"seconds", "tokens", "dtype", "moves"}
    lines ("moves": per member and episode, the instance and the action texts of its turns).

    Runs against whichever coevo is first on the path (this tree, or the baseline's worktree), so it uses
    only what both have; generation g of every worker draws the same members from the same engine seed.
    """
    options = {} if dtype is None else {"dtype": dtype}
    llm = HFBackend.load("smollm2-135m", max_batch_size=episodes, **options)
    counted = {"tokens": 0}
    generate_each = llm.generate_each

    def counting(items):  # tokens/s of the whole generation
        completions = generate_each(items)
        counted["tokens"] += sum(c.completion_tokens for c in completions)
        return completions

    llm.generate_each = counting
    host = llm.weights_host("full", 0)
    engine = ESEngine(ESConfig(population_size=members, sigma=SIGMA, alpha=ALPHA), host)
    seeds = tuple(split_seeds("search")[:episodes])
    workload = AgentWorkload(llm, ENV, HORIZON, seeds, host=host, sampling=AGENT_SAMPLING)
    for _ in sys.stdin:
        counted["tokens"] = 0
        started = time.perf_counter()
        asked = engine.ask()
        refs = [WeightsRef.of("smollm2-135m", engine.step, p) for p in asked]
        evaluations = workload.evaluate([Member("", ref) for ref in refs], traces=True)
        engine.tell(asked, [e.reward for e in evaluations])
        seconds = time.perf_counter() - started
        moves = [[t.instance, [turn.action for turn in t.turns]] for e in evaluations for t in e.trajectories]
        answer = {
            "seconds": seconds,
            "tokens": counted["tokens"],
            "dtype": str(llm.model.dtype).removeprefix("torch."),
            "moves": moves,
        }
        print(json.dumps(answer), flush=True)


class Worker:
    """A worker process over a source tree, asked for one generation at a time."""

    def __init__(self, tree: Path, members: int, episodes: int, dtype: str | None) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", f"--members={members}"]
        command += [f"--episodes={episodes}"] + ([f"--dtype={dtype}"] if dtype else [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(Path(__file__).parent)])}
        self.process = subprocess.Popen(
            command, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def generation(self) -> dict[str, float]:
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {self.process.wait()}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def speedup(settings: Settings, baseline_rev: str) -> dict[str, object]:
    """Baseline seconds over this tree's for the same ES generations, in alternating rounds."""
    from coevo.llm.precision import cpu_has_native_bf16

    native = cpu_has_native_bf16()
    with baseline_worktree(baseline_rev) as baseline_tree:
        sides = {"baseline": Worker(baseline_tree, settings.members, settings.episodes, None)}
        sides["auto"] = Worker(REPO, settings.members, settings.episodes, "auto")
        if native:
            sides["fp32"] = Worker(REPO, settings.members, settings.episodes, "float32")
        try:
            samples = alternate({name: worker.generation for name, worker in sides.items()}, settings.rounds)
        finally:
            for worker in sides.values():
                worker.close()
    seconds = {name: [s["seconds"] for s in runs] for name, runs in samples.items()}
    fp32 = "fp32" if native else "auto"
    figures = {
        **ratio_summary("agent_generation", seconds["baseline"], seconds["auto"]),
        **ratio_summary("agent_generation_fp32", seconds["baseline"], seconds[fp32]),
        **speedup_split("agent_generation", samples["baseline"], samples["auto"]),
        **speedup_split("agent_generation_fp32", samples["baseline"], samples[fp32]),
    }
    return {
        "members": settings.members,
        "episodes_per_member": settings.episodes,
        "rounds": settings.rounds,
        "cpu_has_native_bf16": native,
        "dtype": samples["auto"][0]["dtype"],
        **{f"{name}_seconds": runs for name, runs in seconds.items()},
        **{f"{name}_tokens_per_s": [s["tokens"] / s["seconds"] for s in runs] for name, runs in samples.items()},
        **figures,
    }


def speedup_split(figure: str, baseline: list[dict], side: list[dict]) -> dict[str, object]:
    """`figure` (baseline seconds over `side`'s, round by round) as the product of the shorter replies
    and the faster tokens, and whether both sides made the same moves in the same episodes."""
    tokens_per_s = [[s["tokens"] / s["seconds"] for s in runs] for runs in (side, baseline)]
    differing = [
        f"round {round_}, episode {index} ({before[0]})"
        for round_, (old, new) in enumerate(zip(baseline, side, strict=True), 1)
        for index, (before, after) in enumerate(zip(old["moves"], new["moves"], strict=True), 1)
        if move_feedback(*before) != move_feedback(*after)
    ]
    compared = sum(len(s["moves"]) for s in side)
    return {
        **ratio_summary(f"{figure}_reply_tokens", [s["tokens"] for s in baseline], [s["tokens"] for s in side]),
        **ratio_summary(f"{figure}_per_token", *tokens_per_s),
        f"{figure}_same_moves": [compared - len(differing), compared],
        f"{figure}_differing_moves": differing,
    }


def move_feedback(instance: str, actions: list[str]) -> list[str]:
    """What the environment answered each action of an episode of `instance` ("gridnav-H2/SEED"): the
    move read from the text and its effect, so two texts that say the same move compare equal."""
    env = make_env(ENV, HORIZON)
    env.reset(int(instance.rsplit("/", 1)[1]))
    return [env.step(action)[4]["feedback"] for action in actions]


@contextlib.contextmanager
def baseline_worktree(rev: str) -> Iterator[Path]:
    """A temporary git worktree of `rev` with this tree's compiled extensions, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="coevo-baseline-") as scratch:
        tree = Path(scratch) / "tree"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True
        )
        try:
            _copy_built_extensions(REPO, tree)
            yield tree
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


def _copy_built_extensions(source: Path, target: Path) -> None:
    """Compiled extensions of `source` (not in git) into `target`, where their C source is the same."""
    for built in source.glob("coevo/**/*.so"):
        c_file = built.with_name(built.name.split(".")[0] + ".c").relative_to(source)
        if (target / c_file).is_file() and (target / c_file).read_bytes() == (source / c_file).read_bytes():
            (target / built.relative_to(source)).write_bytes(built.read_bytes())


RECORDED_SPLIT = ("reply_tokens", "per_token", "same_moves", "differing_moves")
"""What the evidence file keeps of each figure's split (`speedup_split`)."""


def record_speedup(results: dict[str, object], path: Path = RESULTS) -> None:
    """Merge the speed-ups and their splits into the evidence file, keeping whatever else it holds."""
    recorded = {**read("speedup", path), "cpu_has_native_bf16": results["cpu_has_native_bf16"]}
    for figure in ("agent_generation", "agent_generation_fp32"):
        recorded[figure] = round(results[figure], 3)
        for part in RECORDED_SPLIT:
            if (value := results.get(f"{figure}_{part}")) is not None:
                recorded[f"{figure}_{part}"] = round(value, 3) if isinstance(value, float) else value
    merge("speedup", recorded, path)


SPEEDUP_TARGETS: dict[str, tuple[str, float]] = {"agent_generation": (">=", 1.5), "agent_generation_fp32": (">=", 1.5)}
"""1.5 without native bf16; on a CPU with it, issue 32 asks 3 of agent_generation."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 members x 2 episodes, one round")
    parser.add_argument("--speedup", action="store_true", help="this tree over BASELINE_REV on one ES generation")
    parser.add_argument("--baseline-rev", default=BASELINE_REV, help="the git revision --speedup compares with")
    parser.add_argument("--rounds", type=int, default=2, help="--speedup: alternating rounds")
    parser.add_argument("--members", type=int, default=2, help="--speedup: ES population")
    parser.add_argument("--episodes", type=int, default=4, help="--speedup: episodes per member")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args.members, args.episodes, args.dtype)
        return 0
    if args.speedup:
        episodes = 1 if args.quick else args.episodes
        size = Settings(members=args.members, episodes=episodes, rounds=args.rounds, max_new_tokens=0)
        results = speedup(size, args.baseline_rev)
        if not args.quick:
            record_speedup(results)
        targets = {**SPEEDUP_TARGETS, "agent_generation": (">=", 3.0 if results["cpu_has_native_bf16"] else 1.5)}
        lines = [f"{k:36s} {v}" if not isinstance(v, float) else target_line(k, v, targets) for k, v in results.items()]
        print(json.dumps(results) if args.json else "\n".join(lines))
        return 0
    results = measure(Settings.of(args.quick))
    print(json.dumps(results) if args.json else "\n".join(target_line(k, v, TARGETS) for k, v in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
