"""ES on the noise-free form of gridnav's skill: each member is worth its mean probability of a closing
first move (`move_choice.py`) on a fresh window of search episodes every generation, and the held-out
figure is the same probability on the first N test episodes every few generations. Nothing is sampled,
so a held-out rise would be the weights' doing, and a flat curve says the updates do not carry over
even where the reward is smooth.

    python experiments/evidence/move_choice_es.py [--generations 30] [--population 16] [--turns 4]
        [--sigma 1e-3] [--alpha 2e-3] [--rank 4] [--every 10] [--episodes 100] [--model smollm2-135m]

Writes the settings and the held-out curve (per episode at each measured generation) under
`gridnav_move_choice_es` in the evidence file; prints one line a generation.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from evidence_file import RESULTS, merge
from move_choice import closing_probabilities, first_turns

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.perturbation import Perturbation
from coevo.es.protocols import WeightsHost
from coevo.run.build import build_host, load_llm
from coevo.run.config import ConfigError, validate
from tasks.agents.splits import env_seeds, verify_split

KEY = "gridnav_move_choice_es"
ENV, HORIZON = "gridnav", 2


def under(host: WeightsHost, member: Perturbation) -> AbstractContextManager[None]:
    """`member`'s weights for every row of the forward passes within: a low-rank host adds its factors
    in hooks (no dense copy), a full-rank one perturbs in place."""
    population = getattr(host, "population", None)
    return population([member], [0]) if population is not None else host.perturbed(member)


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("model", "generations", "population", "turns", "sigma", "alpha", "rank", "every", "episodes")
    return {key: getattr(args, key) for key in keys}


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run the generations; the held-out curve at generation 0, every `every`, and at the end."""
    config = validate(
        {
            "method": "es",
            "model": args.model,
            "population_size": args.population,
            "budget": args.generations * args.population,
            "es": {"rank": args.rank, "scope": "all_linear"},
            "workload": {"kind": "agent", "env": ENV, "horizon": HORIZON},
        }
    )
    llm = load_llm(config, "float32")
    host = build_host(llm, config)
    engine = ESEngine(
        ESConfig(population_size=args.population, antithetic=True, sigma=args.sigma, alpha=args.alpha), host
    )
    search = env_seeds(ENV, "search")
    heldout_seeds = verify_split(ENV, "test", HORIZON)[: args.episodes]
    heldout = first_turns(ENV, HORIZON, heldout_seeds)
    curve = [{"generation": 0, "heldout": closing_probabilities(llm, heldout)}]
    started = time.perf_counter()
    for generation in range(1, args.generations + 1):
        start = (generation - 1) * args.turns
        window = first_turns(ENV, HORIZON, [search[(start + i) % len(search)] for i in range(args.turns)])
        members = engine.ask()
        rewards = []
        for member in members:
            with under(host, member):
                rewards.append(float(np.mean(closing_probabilities(llm, window))))
        engine.tell(members, rewards)
        line = f"generation {generation}: members {np.mean(rewards):.4f} (spread {np.ptp(rewards):.4f})"
        if generation % args.every == 0 or generation == args.generations:
            curve.append({"generation": generation, "heldout": closing_probabilities(llm, heldout)})
            line += f", held-out {np.mean(curve[-1]['heldout']):.4f}"
        print(f"{line}, {time.perf_counter() - started:.0f} s", flush=True)
    return {"settings": settings_of(args), "split": "test", "episode_seeds": list(heldout_seeds), "curve": curve}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--generations", type=int, default=30)
    parser.add_argument("--population", type=int, default=16, help="members per update, mirrored pairs (even)")
    parser.add_argument("--turns", type=int, default=4, help="fresh search episodes per generation")
    parser.add_argument("--sigma", type=float, default=1e-3)
    parser.add_argument("--alpha", type=float, default=2e-3)
    parser.add_argument("--rank", type=int, default=4, help="low-rank members (0: full rank)")
    parser.add_argument("--every", type=int, default=10, help="held-out figure every N generations")
    parser.add_argument("--episodes", type=int, default=100, help="the first N test episodes")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    for name in ("generations", "turns", "every", "episodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.population < 2 or args.population % 2:
        parser.error(f"--population must be even and at least 2 (mirrored pairs), got {args.population}")
    torch.set_grad_enabled(False)
    try:
        record = train(args)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    flags = " ".join(f"--{key} {value}" for key, value in record["settings"].items())
    record["command"] = f"python experiments/evidence/move_choice_es.py {flags}"
    merge(KEY, record, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
