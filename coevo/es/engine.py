"""`ESEngine`: evosax-style ask/tell evolution strategies on weights held by a `WeightsHost`.

One generation: `ask()` gives the population's perturbations (seeds only); the caller evaluates each
member under `host.perturbed(p)`; `tell(perturbations, rewards)` penalises invalid rewards, asks the
strategy (`coevo.es.strategy`, by name: OpenAI-ES by default, ARS) for the step's direction, writes
the update to the history and has the host apply it. With OpenAI-ES the update is the reference rule
theta += alpha / N * sum_i z_i eps_i with shaped rewards and no 1/sigma; with mirrored pairs
(`antithetic`) each reward is first taken less its pair's mean, so whatever the two members of a pair
share (a prompt, a parent, a sampling seed: common random numbers) cancels exactly.

Example: pull three weights towards 1.

>>> import torch
>>> from coevo.es.host import TorchWeightsHost
>>> model = torch.nn.Linear(3, 1, bias=False)
>>> _ = torch.nn.init.zeros_(model.weight)
>>> def reward() -> float:
...     return -float((model.weight.detach() - 1).pow(2).sum())
>>> config = ESConfig(population_size=16, antithetic=True, sigma=0.1, alpha=0.1)
>>> engine = ESEngine(config, TorchWeightsHost(model))
>>> for _ in range(30):
...     members = engine.ask()
...     rewards = []
...     for member in members:
...         with engine.host.perturbed(member):
...             rewards.append(reward())
...     stats = engine.tell(members, rewards)
>>> reward() > -0.05
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Perturbation, Update
from coevo.es.protocols import WeightsHost
from coevo.es.schedules import Schedule, ScheduleConfig
from coevo.es.shaping import SHAPINGS, penalize_invalid
from coevo.es.strategy import Strategy, build_strategy, strategy_settings
from coevo.es.update_log import History, UpdateRecord, replay


class ESConfig(BaseModel):
    """Every knob of the engine in one validated object (numbers for sigma/alpha mean constants)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    population_size: int = Field(ge=1, description="members per update (N), pairs counted twice")
    sigma: ScheduleConfig = Field(description="perturbation scale schedule")
    alpha: ScheduleConfig = Field(description="learning-rate schedule")
    total_steps: int | None = Field(None, ge=1, description="planned updates, the T of decaying schedules")
    shaping: str = Field("zscore", description=f"one of {sorted(SHAPINGS)}")
    antithetic: bool = Field(False, description="mirrored pairs (eps, -eps) sharing one seed")
    strategy: str = Field("openai-es", description="the rule from rewards to a step (coevo.es.strategy)")
    strategy_options: dict[str, Any] = Field(default_factory=dict, description="the strategy's own settings")
    optimizer: OptimizerConfig = OptimizerConfig()
    seed: int = Field(0, ge=0, description="root of every member seed")

    @model_validator(mode="after")
    def _check(self) -> ESConfig:
        if self.shaping not in SHAPINGS:
            raise ValueError(f"shaping must be one of {sorted(SHAPINGS)}, got {self.shaping!r}")
        if self.antithetic and self.population_size % 2:
            raise ValueError(f"antithetic sampling needs an even population_size, got {self.population_size}")
        strategy_settings(self.strategy, self.strategy_options)
        self.sigma.build(self.total_steps)
        self.alpha.build(self.total_steps)
        return self


@dataclass(frozen=True)
class UpdateStats:
    """What one tell() did; `update` is None when every reward was invalid."""

    step: int
    sigma: float
    alpha: float
    n_valid: int
    reward_mean: float | None
    reward_max: float | None
    shaped_rewards: tuple[float, ...] | None
    update: Update | None


def member_seed(root_seed: int, step: int, index: int) -> int:
    """The seed of member `index` at `step`: a pure function, so asking again or resuming repeats it."""
    digest = hashlib.blake2b(f"{root_seed}:{step}:{index}".encode(), digest_size=8, person=b"coevo-seed")
    return int.from_bytes(digest.digest(), "little") >> 1


class ESEngine:
    """Ask/tell ES; the host owns the weights, the engine only numbers (seeds, rewards, coefficients).

    `sigma_schedule`, `alpha_schedule` and `strategy` default to the config's; the schedules may be
    any callables, the strategy any object with `direction` (`coevo.es.strategy.Strategy`).
    The schedules advance one step per update unless `progress` is given: the share of the run done
    (0 to 1), for a run measured in something other than updates (an evaluation budget whose steps
    vary in cost), so that sigma reaches its floor when the run ends, not when a planned count does.
    Given as an exact `Fraction`, a share that falls on a step reads the schedules exactly there.
    """

    def __init__(
        self,
        config: ESConfig,
        host: WeightsHost,
        history: History | None = None,
        *,
        sigma_schedule: Schedule | None = None,
        alpha_schedule: Schedule | None = None,
        strategy: Strategy | None = None,
        progress: Callable[[], float | Fraction] | None = None,
        start_step: int = 0,
    ) -> None:
        self.config = config
        self.host = host
        self.history = history
        self.sigma_schedule = sigma_schedule or config.sigma.build(config.total_steps)
        self.alpha_schedule = alpha_schedule or config.alpha.build(config.total_steps)
        self.strategy = strategy or build_strategy(
            config.strategy, config.strategy_options, SHAPINGS[config.shaping], config.antithetic
        )
        self.progress = progress
        self.step = start_step
        self._position: tuple[int, float] | None = None
        """(step, where the schedules are read at that step), fixed at the step's first ask."""

    @classmethod
    def resume(cls, config: ESConfig, host: WeightsHost, history: History, **injected) -> ESEngine:
        """Replay `history` into the host's base weights and continue after its last step."""
        records = history.load()
        replay(host, records)
        return cls(config, host, history, start_step=len(records), **injected)

    def ask(self) -> list[Perturbation]:
        """This step's population; the same list however often it is asked."""
        sigma = self.sigma_schedule(self.position())
        n_seeds = self.config.population_size // 2 if self.config.antithetic else self.config.population_size
        seeds = [member_seed(self.config.seed, self.step, i) for i in range(n_seeds)]
        if self.config.antithetic:
            return [Perturbation(seed, sigma, sign) for seed in seeds for sign in (1, -1)]
        return [Perturbation(seed, sigma) for seed in seeds]

    def tell(self, perturbations: Sequence[Perturbation], rewards: Sequence[float | None]) -> UpdateStats:
        """Shape the rewards (None/NaN = invalid), record the update and apply it through the host.

        At sigma 0 (a schedule decayed to its end, a run that outlasts its planned steps) the members
        are the live weights themselves, so their rewards differ by chance alone: the step is recorded
        with no update, as when every member is invalid, instead of moving the weights along noise."""
        if len(perturbations) != len(rewards) or not perturbations:
            raise ValueError(f"need one reward per perturbation, got {len(rewards)} for {len(perturbations)}")
        sigmas = {p.sigma for p in perturbations}
        if len(sigmas) != 1:
            raise ValueError(f"a population shares one sigma, got {sorted(sigmas)}")
        sigma = sigmas.pop()
        alpha = self.alpha_schedule(self.position())
        filled = penalize_invalid(rewards)
        direction = None if filled is None else self.strategy.direction(perturbations, filled)
        update = None
        if direction is not None and sigma != 0.0:
            update = Update(tuple(direction.coeffs), tuple(direction.coeffs.values()), alpha, self.config.optimizer)
        raw = tuple(None if r is None or np.isnan(r) else float(r) for r in rewards)
        record = UpdateRecord(
            step=self.step,
            seeds=tuple(p.seed for p in perturbations),
            signs=tuple(p.sign for p in perturbations),
            sigma=sigma,
            raw_rewards=raw,
            shaped_rewards=None if direction is None else tuple(float(z) for z in direction.shaped),
            alpha=alpha,
            scope=self.host.scope,
            noise_version=self.host.noise_version,
            update=update,
            residuals=None
            if direction is None or direction.residuals is None
            else tuple(map(float, direction.residuals)),
        )
        if self.history is not None:
            self.history.append(record)
        if update is not None:
            self.host.apply_update(update)
        valid = [r for r in raw if r is not None]
        self.step += 1
        return UpdateStats(
            step=record.step,
            sigma=record.sigma,
            alpha=alpha,
            n_valid=len(valid),
            reward_mean=float(np.mean(valid)) if valid else None,
            reward_max=max(valid) if valid else None,
            shaped_rewards=record.shaped_rewards,
            update=update,
        )

    def position(self) -> float:
        """Where this step reads the schedules, in steps: the step itself, or the share of the run done
        times the planned steps. Fixed at the step's first read, so asking again repeats the population
        and `tell` reads alpha where `ask` read sigma."""
        if self.progress is None:
            return self.step
        if self._position is None or self._position[0] != self.step:
            share = min(max(self.progress(), 0), 1)
            self._position = (self.step, float(share * (self.config.total_steps or 1)))
        return self._position[1]
