"""ESEngine: schedules, shaping, the reference update rule, options, and ES on a quadratic."""

import doctest
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch import nn

from coevo.es import engine as engine_module
from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.es.noise import noise
from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Update
from coevo.es.schedules import ScheduleConfig, constant, cosine, linear
from coevo.es.shaping import centered_rank, penalize_invalid, zscore


class Vector(nn.Module):
    """A single parameter vector: the weights of a problem with a known gradient."""

    def __init__(self, values: torch.Tensor) -> None:
        super().__init__()
        self.theta = nn.Parameter(values.clone().float())


def squared_norm(module: Vector) -> float:
    return float(module.theta.detach().double().pow(2).sum())


def run_generation(engine: ESEngine, reward) -> None:
    perturbations = engine.ask()
    rewards = []
    for p in perturbations:
        with engine.host.perturbed(p):
            rewards.append(reward())
    engine.tell(perturbations, rewards)


# --- schedules -----------------------------------------------------------------------------------


def test_cosine_schedule_follows_the_reference_formula_and_stays_at_its_floor():
    schedule = cosine(1e-3, 2.5e-4, total_steps=100)
    assert schedule(0) == pytest.approx(1e-3)
    assert schedule(50) == pytest.approx((1e-3 + 2.5e-4) / 2)
    assert schedule(25) == pytest.approx(2.5e-4 + 7.5e-4 * (1 + math.cos(math.pi / 4)) / 2)
    assert schedule(100) == schedule(400) == pytest.approx(2.5e-4)
    values = [schedule(t) for t in range(101)]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_linear_constant_and_warm_up():
    assert linear(1.0, 0.0, total_steps=10)(5) == pytest.approx(0.5)
    assert constant(0.3)(1000) == 0.3
    warm = cosine(1.0, 0.0, total_steps=12, warmup_steps=2)
    assert [warm(0), warm(1), warm(2), warm(7), warm(12)] == pytest.approx([1 / 3, 2 / 3, 1.0, 0.5, 0.0])


def test_schedule_config_accepts_numbers_and_needs_a_horizon_to_decay():
    assert ScheduleConfig.model_validate(0.5).build(None)(99) == 0.5
    with pytest.raises(ValueError, match="total_steps"):
        ScheduleConfig(start=1.0, end=0.0, kind="cosine").build(None)


# --- shaping and invalid rewards -----------------------------------------------------------------


def test_zscore_is_the_reference_normalisation():
    rewards = np.array([1.0, 2.0, 4.0, 9.0])
    shaped = zscore(rewards)
    assert shaped == pytest.approx((rewards - rewards.mean()) / (rewards.std() + 1e-8))
    assert np.all(zscore(np.full(5, 3.0)) == 0.0)


def test_centered_ranks_are_invariant_to_monotone_transforms_and_share_ties():
    rewards = np.array([0.3, -5.0, 2.0, 2.0, 10.0])
    shaped = centered_rank(rewards)
    assert shaped.min() == -0.5 and shaped.max() == 0.5
    assert shaped[2] == shaped[3]
    assert np.array_equal(centered_rank(np.exp(rewards)), shaped)


def test_invalid_rewards_follow_the_reference_penalty():
    filled = penalize_invalid([1.0, None, 3.0, float("nan")])
    assert filled == pytest.approx([1.0, 0.0, 3.0, 0.0])  # min 1 - std 1
    assert penalize_invalid([200.0, None])[1] == pytest.approx(198.0)  # flat: max(0.01 * 200, 1)
    assert penalize_invalid([0.5, 0.5, None])[2] == pytest.approx(-0.5)  # flat: max(0.005, 1)
    assert penalize_invalid([None, float("nan")]) is None
    with pytest.raises(ValueError, match="finite"):
        penalize_invalid([1.0, float("inf")])


# --- ask / tell ----------------------------------------------------------------------------------


def make_engine(module: nn.Module, progress=None, **overrides) -> ESEngine:
    settings = dict(population_size=6, sigma=0.1, alpha=0.05)
    settings.update(overrides)
    return ESEngine(ESConfig(**settings), TorchWeightsHost(module), progress=progress)


def test_config_rejects_bad_settings_with_clear_errors():
    with pytest.raises(ValidationError, match="even population_size"):
        ESConfig(population_size=5, sigma=0.1, alpha=0.1, antithetic=True)
    with pytest.raises(ValidationError, match="shaping must be one of"):
        ESConfig(population_size=4, sigma=0.1, alpha=0.1, shaping="softmax")
    with pytest.raises(ValidationError, match="total_steps"):
        ESConfig(population_size=4, sigma={"start": 0.1, "end": 0.0, "kind": "cosine"}, alpha=0.1)
    with pytest.raises(ValidationError, match=r"unexpected|Extra"):
        ESConfig(population_size=4, sigma=0.1, alpha=0.1, sigma_0=0.1)


def test_ask_is_repeatable_and_new_at_every_step():
    engine = make_engine(Vector(torch.zeros(3)), antithetic=True)
    first = engine.ask()
    assert engine.ask() == first
    assert [p.sign for p in first] == [1, -1] * 3
    assert len({p.seed for p in first}) == 3
    engine.tell(first, [1.0, 0.0, 2.0, 1.0, 0.5, 0.0])
    assert not {p.seed for p in engine.ask()} & {p.seed for p in first}


def test_default_update_is_the_reference_rule():
    module = Vector(torch.linspace(-1, 1, 40))
    before = module.theta.detach().numpy().astype(np.float64)
    engine = make_engine(module)
    perturbations = engine.ask()
    rewards = [3.0, -1.0, 0.5, 2.0, 7.0, 0.0]
    engine.tell(perturbations, rewards)
    z = (np.array(rewards) - np.mean(rewards)) / (np.std(rewards) + 1e-8)
    expected = before + 0.05 / 6 * sum(zi * noise(p.seed, "theta", 40) for zi, p in zip(z, perturbations, strict=True))
    assert module.theta.detach().numpy() == pytest.approx(expected, abs=1e-6)


def test_mirrored_pairs_merge_into_one_coefficient_per_seed():
    engine = make_engine(Vector(torch.zeros(8)), antithetic=True, population_size=4)
    perturbations = engine.ask()
    stats = engine.tell(perturbations, [1.0, 3.0, 2.0, 2.0])
    z = zscore(np.array([1.0, 3.0, 2.0, 2.0]))
    assert stats.update.seeds == (perturbations[0].seed, perturbations[2].seed)
    assert stats.update.coeffs == pytest.approx([(z[0] - z[1]) / 4, (z[2] - z[3]) / 4])


def test_all_invalid_rewards_leave_the_weights_alone_but_advance_the_step():
    module = Vector(torch.ones(4))
    engine = make_engine(module)
    stats = engine.tell(engine.ask(), [None] * 6)
    assert stats.update is None and stats.n_valid == 0
    assert torch.equal(module.theta, torch.ones(4)) and engine.step == 1


def test_a_step_at_sigma_zero_records_its_rewards_but_leaves_the_weights_alone():
    """A cosine to 0 run past its planned steps asks unperturbed members: their rewards carry no
    direction, so no update may move the weights along the (unused) noise."""
    module = Vector(torch.ones(4))
    engine = make_engine(module, sigma={"start": 0.1, "end": 0.0, "kind": "cosine"}, total_steps=2)
    run_generation(engine, lambda: 1.0)  # step 0: sigma 0.1, ties, zero coefficients
    engine.tell(engine.ask(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])  # step 1: sigma 0.05, an update
    moved = module.theta.detach().clone()
    assert not torch.equal(moved, torch.ones(4))
    perturbations = engine.ask()
    assert {p.sigma for p in perturbations} == {0.0}
    stats = engine.tell(perturbations, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert stats.update is None and stats.sigma == 0.0 and stats.n_valid == 6 and engine.step == 3
    assert torch.equal(module.theta.detach(), moved)


def test_schedules_follow_the_runs_progress_when_given_not_the_update_count():
    """A run of 10 planned updates that has spent 30% of its budget reads its schedules at step 3, however
    many updates it has made; the position is fixed at the step's first ask, so asking again repeats the
    population and tell reads alpha where ask read sigma."""
    share = [0.3]
    schedule = {"start": 1.0, "end": 0.0, "kind": "linear"}
    engine = make_engine(
        Vector(torch.ones(4)), progress=lambda: share[0], sigma=schedule, alpha=schedule, total_steps=10
    )
    members = engine.ask()
    assert [p.sigma for p in members] == pytest.approx([0.7] * 6)
    share[0] = 0.5  # evaluations spent between ask and tell
    assert engine.ask() == members
    stats = engine.tell(members, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert stats.alpha == pytest.approx(0.7) and engine.step == 1
    assert [p.sigma for p in engine.ask()] == pytest.approx([0.5] * 6)
    share[0] = 1.7  # past the end: the floor, not beyond it
    engine.tell(engine.ask(), [1.0] * 6)
    assert {p.sigma for p in engine.ask()} == {0.0}


def test_an_exact_share_that_falls_on_a_step_reads_the_schedule_exactly_there():
    """32 members a step, 3200 evaluations, 100 steps: in floats 224 / 3200 * 100 is not 7."""
    schedule = {"start": 1e-3, "end": 2.5e-4, "kind": "cosine"}
    engine = make_engine(
        Vector(torch.ones(4)), progress=lambda: Fraction(7 * 32, 3200), sigma=schedule, total_steps=100
    )
    assert engine.position() == 7.0
    assert {p.sigma for p in engine.ask()} == {cosine(1e-3, 2.5e-4, total_steps=100)(7)}


def test_tell_rejects_mismatched_rewards():
    engine = make_engine(Vector(torch.ones(4)))
    with pytest.raises(ValueError, match="one reward per perturbation"):
        engine.tell(engine.ask(), [1.0])


def test_the_documented_example_runs():
    assert doctest.testmod(engine_module, raise_on_error=True).attempted > 0


# --- optimizers ----------------------------------------------------------------------------------


def apply_twice(optimizer: dict, coeffs=(1.0, -0.5)) -> tuple[np.ndarray, np.ndarray]:
    module = Vector(torch.linspace(-2, 2, 64))
    before = module.theta.detach().numpy().copy()
    host = TorchWeightsHost(module)
    update = Update(seeds=(7, 8), coeffs=coeffs, alpha=0.01, optimizer=OptimizerConfig(**optimizer))
    host.apply_update(update)
    host.apply_update(update)
    return before, module.theta.detach().numpy().copy()


def test_momentum_accumulates_repeated_gradients():
    before, after = apply_twice({"momentum": 0.9})
    gradient = noise(7, "theta", 64) - 0.5 * noise(8, "theta", 64)
    assert after - before == pytest.approx(0.01 * (1 + 1.9) * gradient, abs=1e-6)


def test_adam_moves_every_weight_by_about_alpha_per_step():
    before, after = apply_twice({"kind": "adam"})
    assert np.abs(after - before) == pytest.approx(np.full(64, 0.02), rel=1e-3)


def test_weight_decay_shrinks_towards_zero_without_a_gradient():
    before, after = apply_twice({"weight_decay": 0.5}, coeffs=(0.0, 0.0))
    assert after == pytest.approx(before * (1 - 0.01 * 0.5) ** 2, rel=1e-6)


# --- ES on a quadratic with a known gradient -----------------------------------------------------


def test_gradient_estimate_cosine_grows_with_population_as_theory_says():
    """For a linear-ish reward, E cos(g_hat, grad) ~ sqrt(N / (N + d + 1)) with Gaussian noise."""
    dim, trials = 100, 4
    target = torch.linspace(-1.0, 1.0, dim)
    observed = {}
    for population in (10, 100, 1000):
        cosines = []
        for trial in range(trials):
            module = Vector(torch.zeros(dim))
            engine = make_engine(module, population_size=population, sigma=1e-3, alpha=1.0, seed=trial)
            run_generation(engine, lambda m=module: -float((m.theta.detach() - target).pow(2).sum()))
            step, gradient = module.theta.detach().numpy(), 2 * target.numpy()
            cosines.append(step @ gradient / np.linalg.norm(step) / np.linalg.norm(gradient))
        observed[population] = np.mean(cosines)
        assert observed[population] == pytest.approx(math.sqrt(population / (population + dim + 1)), abs=0.06)
    assert observed[10] < observed[100] < observed[1000]


def test_es_minimises_a_20d_quadratic_from_loss_20_to_below_1e_2_in_50_steps():
    module = Vector(torch.ones(20))
    engine = make_engine(
        module,
        population_size=32,
        antithetic=True,
        sigma=0.05,
        alpha={"start": 0.3, "end": 0.01, "kind": "cosine"},
        total_steps=60,
    )
    for _ in range(50):
        run_generation(engine, lambda: -squared_norm(module))
    assert squared_norm(module) < 1e-2
