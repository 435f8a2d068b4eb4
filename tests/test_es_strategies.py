"""ES strategies by name: OpenAI-ES (the default, the reference rule) and ARS, each turning rewards into
seed coefficients that replay exactly; a strategy of one's own is one file named by its spec."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch import nn

from coevo.es.ars import ARS
from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.es.openai_es import OpenAIES
from coevo.es.perturbation import Perturbation
from coevo.es.shaping import centered_rank
from coevo.es.update_log import ESHistory, replay

PAIRS = [Perturbation(seed, 0.1, sign) for seed in (11, 22, 33, 44) for sign in (1, -1)]
REWARDS = np.array([3.0, 1.0, 0.0, 2.5, 5.0, 4.0, 0.5, 0.2])
"""Pair 11: +3 / -1; pair 22: 0 / 2.5; pair 33: 5 / 4; pair 44: 0.5 / 0.2."""


def test_openai_es_is_the_reference_rule_on_pair_centred_ranks() -> None:
    direction = OpenAIES(OpenAIES.Settings(), centered_rank, antithetic=True).direction(PAIRS, REWARDS)
    residuals = REWARDS - np.repeat(REWARDS.reshape(4, 2).mean(axis=1), 2)
    shaped = centered_rank(residuals)
    assert np.allclose(direction.residuals, residuals) and np.allclose(direction.shaped, shaped)
    expected = {p.seed: 0.0 for p in PAIRS}
    for p, z in zip(PAIRS, shaped, strict=True):
        expected[p.seed] += z * p.sign / len(PAIRS)
    assert direction.coeffs == pytest.approx(expected)


def test_ars_keeps_the_best_pairs_and_scales_by_their_spread() -> None:
    direction = ARS(ARS.Settings(top_share=0.5), centered_rank, antithetic=True).direction(PAIRS, REWARDS)
    kept = [5.0, 4.0, 3.0, 1.0]  # pairs 33 (best 5) and 11 (best 3); 22's best is 2.5
    spread = np.std(kept)
    assert set(direction.coeffs) == {11, 33}
    assert direction.coeffs[33] == pytest.approx((5.0 - 4.0) / (2 * spread))
    assert direction.coeffs[11] == pytest.approx((3.0 - 1.0) / (2 * spread))
    assert direction.residuals is None and np.count_nonzero(direction.shaped) == 4


def test_ars_gives_no_direction_when_the_kept_rewards_tie_and_refuses_lone_members() -> None:
    ars = ARS(ARS.Settings(top_share=1.0), centered_rank, antithetic=True)
    assert ars.direction(PAIRS, np.full(8, 2.0)) is None
    with pytest.raises(ValueError, match="mirrored pairs"):
        ARS(ARS.Settings(), centered_rank, antithetic=False)


def _quadratic_run(strategy: str, history: Path, generations: int = 40) -> tuple[nn.Module, ESEngine]:
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False)
    nn.init.zeros_(model.weight)
    config = ESConfig(population_size=16, antithetic=True, sigma=0.1, alpha=0.1, strategy=strategy)
    engine = ESEngine(config, TorchWeightsHost(model), ESHistory(history))
    for _ in range(generations):
        members = engine.ask()
        rewards = []
        for member in members:
            with engine.host.perturbed(member):
                rewards.append(-float((model.weight.detach() - 1).pow(2).sum()))
        engine.tell(members, rewards)
    return model, engine


@pytest.mark.parametrize("strategy", ["openai-es", "ars"])
def test_each_strategy_climbs_a_quadratic_and_its_history_replays_exactly(strategy: str, tmp_path: Path) -> None:
    model, _ = _quadratic_run(strategy, tmp_path / "history.jsonl")
    assert float((model.weight.detach() - 1).pow(2).sum()) < 0.05
    fresh = nn.Linear(3, 1, bias=False)
    nn.init.zeros_(fresh.weight)
    replay(TorchWeightsHost(fresh), ESHistory(tmp_path / "history.jsonl"))
    assert torch.equal(fresh.weight, model.weight)


def test_the_strategies_step_differently_on_the_same_rewards(tmp_path: Path) -> None:
    openai_es, _ = _quadratic_run("openai-es", tmp_path / "a.jsonl", generations=1)
    ars, _ = _quadratic_run("ars", tmp_path / "b.jsonl", generations=1)
    assert not torch.equal(openai_es.weight, ars.weight)


def test_a_strategy_of_ones_own_is_a_file_named_by_its_spec(tmp_path: Path) -> None:
    """Only the best pair's difference, sign only: one module, no registration beyond its spec."""
    (tmp_path / "best_pair.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from pydantic import BaseModel

            from coevo.es.strategy import Direction, seed_coefficients


            class BestPair:
                name = "best-pair"

                class Settings(BaseModel):
                    step: float = 1.0

                def __init__(self, settings, shaping, antithetic):
                    self.step = settings.step

                def direction(self, perturbations, rewards):
                    best = int(np.argmax(rewards))
                    weights = np.zeros(len(perturbations))
                    weights[best] = self.step
                    return Direction(seed_coefficients(perturbations, weights), weights)
            """
        )
    )
    spec = f"{tmp_path / 'best_pair.py'}:BestPair"
    config = ESConfig(
        population_size=4, antithetic=True, sigma=0.1, alpha=0.5, strategy=spec, strategy_options={"step": 2.0}
    )
    engine = ESEngine(config, TorchWeightsHost(nn.Linear(2, 1, bias=False)))
    members = engine.ask()
    stats = engine.tell(members, [0.0, 1.0, 3.0, 2.0])
    moved = {seed: coeff for seed, coeff in zip(stats.update.seeds, stats.update.coeffs, strict=True) if coeff}
    assert moved == {members[2].seed: 2.0}
    with pytest.raises(ValidationError, match="step"):
        ESConfig(population_size=4, sigma=0.1, alpha=0.1, strategy=spec, strategy_options={"step": "far"})


def test_an_unknown_strategy_or_option_is_one_line(tmp_path: Path, capsys) -> None:
    from coevo.cli import main as coevo

    config = tmp_path / "run.toml"
    base = 'method = "eoh+es"\ntask = "tsp_construct"\nmodel = "smollm2-135m"\nbudget = 8\n[es]\n'
    for es, message in (
        ('strategy = "cma"\n', "unknown ES strategy 'cma'; known ES strategies: ars, openai-es"),
        (
            'strategy = "ars"\nstrategy_options = {top_share = 2}\n',
            "top_share: Input should be less than or equal to 1",
        ),
        ('strategy = "ars"\nantithetic = false\n', "ES strategy 'ars' steps along mirrored pairs"),
    ):
        config.write_text(base + es)
        assert coevo(["run", str(config), "--run-dir", str(tmp_path / "never")]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "never").exists()
