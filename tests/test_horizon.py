"""experiments/agents/horizon.py's table: means over seeds per (H, arm), base from the es runs, paired tests."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "agents" / "horizon.py"
SPEC = importlib.util.spec_from_file_location("experiments_horizon", SCRIPT)
horizon = sys.modules.setdefault(SPEC.name, importlib.util.module_from_spec(SPEC))  # dataclasses look it up
SPEC.loader.exec_module(horizon)

TRAINED = {  # (H, seed) -> trained success per arm
    (2, 0): {"es": 0.5, "grpo": 0.25, "grpo/4": 0.25},
    (2, 1): {"es": 0.75, "grpo": 0.5, "grpo/4": 0.75},
    (4, 0): {"es": 0.25, "grpo": 0.0, "grpo/4": 0.0},
    (4, 1): {"es": 0.25, "grpo": 0.25, "grpo/4": 0.0},
}


def _rows() -> list[dict]:
    return [
        {"horizon": h, "seed": s, "arm": arm, "episodes_played": {"es": 32, "grpo": 32, "grpo/4": 8}[arm],
         "base": 0.125 * (s + 1) if arm == "es" else 0.9, "trained": rate, "heldout_episodes": 4}
        for (h, s), arms in TRAINED.items() for arm, rate in arms.items()
    ]


def test_the_table_averages_seeds_takes_base_from_es_runs_and_pairs_es_with_each_grpo_arm():
    summary = horizon.summarise(_rows(), [2, 4])
    h2, h4 = summary["table"]
    assert h2["success"]["base"] == (0.1875, 0.08838834764831845), "base: the es runs' before-figures only"
    assert h2["success"]["es"][0] == 0.625 and h4["success"]["grpo/4"] == (0.0, 0.0)
    assert h2["episodes_played"] == {"es": 32, "grpo": 32, "grpo/4": 8}
    matched, reference = summary["es_vs_grpo"]["matched"], summary["es_vs_grpo"]["reference"]
    assert matched["es_vs"] == "grpo" and matched["sentence"].startswith("better in 3 of 4 settings (1 ties, 0 worse)")
    assert reference["es_vs"] == "grpo/4" and reference["sentence"].startswith("better in 3 of 4 settings (1 ties")


def test_the_markdown_has_one_row_per_horizon_and_one_line_per_comparison():
    options = argparse.Namespace(env="gridnav", model="m", seeds=[0, 1], heldout_episodes=4, population=2,
                                 generations=2, episodes=2)
    text = horizon.markdown(horizon.summarise(_rows(), [2, 4]), "python horizon.py", options)
    assert "| 2 | 0.1875 ± 0.088 | 0.625 ± 0.18 | 0.375 ± 0.18 | 0.5 ± 0.35 | 32 / 32 / 8 |" in text
    assert text.count("- es vs grpo") == 2
