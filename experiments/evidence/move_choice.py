"""Whether the model prefers, on gridnav, the move that closes in on the goal, read from its
probabilities instead of sampled: at the first turn of each of the first N held-out episodes, the
prompt the policy gets, then "move", and the probability the model gives each direction next,
renormalised over the four. Held-out success counts finished episodes, a coarse and noisy measure;
this one says whether the weights point the right way at all, with no sampling noise.

    python experiments/evidence/move_choice.py RUN_DIR... [--episodes 100] [--name N...]

Every run is an ES agent run on gridnav (or its dense variant); the base weights are measured once,
each run's final weights (its updates replayed) once. Writes per episode the probability of a closing
move under each, its chance level (the share of the four moves that close in), and how often a uniform
random walker solves the episode, under `gridnav_move_choice` in the evidence file.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from evidence_file import merge
from stored_run import StoredRun, parse_runs, runs_parser, same_base

from coevo.run.store import StoreError
from tasks.agents import env_class, make_env, rollout
from tasks.agents.gridnav import DIRECTIONS, GridNav
from tasks.agents.splits import verify_split

KEY = "gridnav_move_choice"
BATCH_ROWS = 16
WALKS = 200
"""Random walks per episode: the walker's success share is then known to about +-0.035 an episode."""


def first_turns(env: str, horizon: int, seeds: Sequence[int]) -> list[tuple[str, frozenset[str]]]:
    """Per seed: the first observation and the directions whose move would shorten the distance."""
    turns = []
    for seed in seeds:
        game = make_env(env, horizon)
        observation = game.reset(seed)
        (row, col), (goal_row, goal_col) = game.position, game.goal
        distance = abs(row - goal_row) + abs(col - goal_col)
        closing = frozenset(
            name
            for name, (dr, dc) in DIRECTIONS.items()
            if abs(row + dr - goal_row) + abs(col + dc - goal_col) < distance
        )
        turns.append((observation, closing))
    return turns


def random_walk_success(env: str, horizon: int, seeds: Sequence[int], walks: int = WALKS) -> list[float]:
    """Per seed, the share of `walks` episodes a uniform random walker solves: a valid move every turn
    and no reading at all, the floor that a policy which reads nothing but writes valid moves reaches."""
    rng = np.random.default_rng(0)
    names = list(DIRECTIONS)

    def walker(prompts: list[str]) -> list[str]:
        return [f"move {names[i]}" for i in rng.integers(len(names), size=len(prompts))]

    played = rollout(env, [seed for seed in seeds for _ in range(walks)], walker, horizon=horizon)
    return [sum(e.success for e in played[i * walks : (i + 1) * walks]) / walks for i in range(len(seeds))]


def direction_tokens(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The tokens of "move" and the one token each direction adds after it (what the model must pick)."""
    head = tokenizer("move", add_special_tokens=False)["input_ids"]
    moves = [tokenizer(f"move {name}", add_special_tokens=False)["input_ids"] for name in DIRECTIONS]
    if any(move[:-1] != head or len(move) != len(head) + 1 for move in moves):
        raise ValueError("this tokenizer does not write each direction as one token after 'move'")
    return head, [move[-1] for move in moves]


@torch.no_grad()
def closing_probabilities(llm: Any, turns: Sequence[tuple[str, frozenset[str]]]) -> list[float]:
    """Per turn, the probability of a closing direction after the prompt and "move", over the four."""
    tokenizer, model = llm.tokenizer, llm.model
    head, choices = direction_tokens(tokenizer)
    names = list(DIRECTIONS)
    pad = tokenizer.pad_token_id or 0
    found: list[float] = []
    for start in range(0, len(turns), BATCH_ROWS):
        batch = turns[start : start + BATCH_ROWS]
        rows = [
            tokenizer(llm.render([{"role": "user", "content": text}]), add_special_tokens=False)["input_ids"] + head
            for text, _ in batch
        ]
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), pad)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):  # left padding: every row's next token is read at the last position
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1).logits[:, -1]
        probabilities = logits[:, choices].float().softmax(-1).numpy()
        for p, (_, closing) in zip(probabilities, batch, strict=True):
            found.append(float(sum(p[names.index(name)] for name in closing)))
    return found


def gridnav_setting(run: StoredRun) -> tuple[Any, ...]:
    """What the base side depends on: the model, the instances and H, the evolved weights and dtype."""
    workload = run.config.workload
    if getattr(workload, "env", None) is None or not issubclass(env_class(workload.env), GridNav):
        raise StoreError(f"{run.path}: not a gridnav agent run, so it has no moves to read")
    env = env_class(workload.env)
    instances = env.shares_instances_with or env.name
    return run.config.model, instances, workload.agent_horizon, run.config.es.rank, run.config.es.scope, run.dtype


def move_choice(runs: list[StoredRun], episodes: int) -> dict[str, Any]:
    """Chance, the base weights and each run's final weights on the same first turns."""
    same_base(runs, gridnav_setting, "model, instances, horizon, evolved weights or dtype")
    workload = runs[0].config.workload
    seeds = verify_split(workload.env, "test", workload.agent_horizon)[:episodes]
    turns = first_turns(workload.env, workload.agent_horizon, seeds)
    base_llm, base_sha = runs[0].model(replayed=False)
    record: dict[str, Any] = {
        "model": runs[0].config.model,
        "env": workload.env,
        "horizon": workload.agent_horizon,
        "split": "test",
        "episode_seeds": list(seeds),
        "chance": [len(closing) / len(DIRECTIONS) for _, closing in turns],
        "random_walk_success": random_walk_success(workload.env, workload.agent_horizon, seeds),
        "base": closing_probabilities(base_llm, turns),
        "runs": {},
    }
    del base_llm
    for run in runs:
        llm, sha = run.model(replayed=True)
        record["runs"][str(run.path)] = {
            "updates": len(run.records),
            "directed_updates": sum(r.has_direction for r in run.records),
            "weights_changed": sha != base_sha,
            "after": closing_probabilities(llm, turns),
        }
    return record


def main(argv: list[str] | None = None) -> int:
    parser = runs_parser(
        __doc__.splitlines()[0], "finished ES agent runs on gridnav", default_names="the run directory's"
    )
    parser.add_argument("--episodes", type=int, default=100, help="the first N test episodes (default: 100)")
    args = parse_runs(parser, argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    torch.set_grad_enabled(False)
    try:
        runs = [StoredRun.open(run_dir) for run_dir in args.run_dirs]
        record = move_choice(runs, args.episodes)
    except (StoreError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = args.name or [run.path.resolve().name for run in runs]
    record["runs"] = dict(zip(names, record["runs"].values(), strict=True))
    merge(KEY, record, args.results)
    print(f"chance {np.mean(record['chance']):.3f}, base {np.mean(record['base']):.3f}", end="")
    for name, figures in record["runs"].items():
        print(f", {name} {np.mean(figures['after']):.3f} ({figures['updates']} updates)", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
