"""Instance seeds of the agent splits and their SHA-256 manifests (``tasks/data/env_<name>.json``).

Every environment draws its instances from the same seed lists (the reference's seed 20260701
onward; 32 search and 32 val puzzles as the reference trains and evaluates on, and 100 test episodes
so a success rate has a usable interval). The manifests hash the instances those seeds produce at
every H, so a generator that drifts fails `verify_split` instead of silently changing a benchmark.
Regenerate after a deliberate change with ``python -m tasks.agents.splits``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from tasks.base import SPLITS, SplitName

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
BASE_SEED = 20260701
SPLIT_SIZES: dict[SplitName, int] = {"search": 32, "val": 32, "test": 100}
_SPLIT_OFFSETS: dict[SplitName, int] = {"search": 0, "val": 10_000, "test": 20_000}


class ManifestMismatch(Exception):
    """The instances a split's seeds produce are not the ones its manifest was written for."""


def split_seeds(split: SplitName) -> list[int]:
    """The instance seeds of one split, the same for every environment."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    start = BASE_SEED + _SPLIT_OFFSETS[split]
    return list(range(start, start + SPLIT_SIZES[split]))


def env_seeds(name: str, split: SplitName) -> list[int]:
    """The instance seeds of `name`'s split: a plugin environment's own `splits` where it declares them,
    else the seeds every environment shares."""
    from tasks.agents import env_class

    own = getattr(env_class(name), "splits", None)
    if own is not None and split in own:
        return list(own[split])
    return split_seeds(split)


def instances_sha256(name: str, horizon: int, seeds: list[int]) -> str:
    """SHA-256 of the canonical JSON of the instances the seeds produce."""
    from tasks.agents import make_env

    env = make_env(name, horizon)
    digest = hashlib.sha256()
    for seed in seeds:
        env.reset(seed)
        digest.update(json.dumps({"seed": seed, **env.instance()}, sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()


def manifest_path(name: str) -> Path:
    from tasks.agents import instances_of

    return DATA_DIR / f"env_{instances_of(name)}.json"


@functools.cache
def load_manifest(name: str) -> dict[str, dict[str, str]]:
    """split -> "H<h>" -> sha256, as shipped."""
    path = manifest_path(name)
    if not path.exists():
        raise ManifestMismatch(f"no manifest shipped for {name}: run python -m tasks.agents.splits")
    return json.loads(path.read_text())["splits"]


def verify_split(name: str, split: SplitName, horizon: int) -> list[int]:
    """The split's seeds, after checking that they still produce the shipped instances (a plugin
    environment's instances are its author's: no manifest of coevo's covers them)."""
    from tasks.agents import env_class
    from tasks.agents.plugin import PluginEnv

    if issubclass(env_class(name), PluginEnv):
        return env_seeds(name, split)
    seeds = split_seeds(split)
    expected = load_manifest(name).get(split, {}).get(f"H{horizon}")
    actual = instances_sha256(name, horizon, seeds)
    if expected != actual:
        shown = "nothing" if expected is None else expected[:12]
        raise ManifestMismatch(f"{name} {split}/H{horizon}: instances hash to {actual[:12]}, manifest has {shown}")
    return seeds


def write_manifest(name: str) -> Path:
    """Write the manifest of one instance family atomically."""
    from tasks.agents import env_class

    payload = {
        "env": name,
        "base_seed": BASE_SEED,
        "split_sizes": SPLIT_SIZES,
        "splits": {
            split: {f"H{h}": instances_sha256(name, h, split_seeds(split)) for h in env_class(name).horizons}
            for split in SPLITS
        },
    }
    path = manifest_path(name)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(payload, indent=1) + "\n")
    temporary.replace(path)
    load_manifest.cache_clear()
    return path


if __name__ == "__main__":
    from tasks.agents import ENV_NAMES, instances_of

    for env_name in sorted({instances_of(n) for n in ENV_NAMES}):
        print(write_manifest(env_name))
