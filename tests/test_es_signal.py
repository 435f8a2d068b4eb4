"""Does ES hear the weights' effect when a prompt variant, a parent and the sampler move the reward far
more? A synthetic heuristic workload whose child fitness is a known linear function of the member's
weights plus a large prompt-variant effect, its parent's quality and sampling noise, driven through the
real `coevo` method, the real engine and a real weights host: the update must point along the true
gradient, and no member's reward may be thrown away."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
import torch

from coevo.candidate import Candidate
from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.family import HEURISTICS
from coevo.llm.base import SamplingParams
from coevo.operators.templates import default_templates
from coevo.population import Population, PromptPool, PromptVariant
from coevo.run.build import build_method
from coevo.run.config import ConfigError, validate

DIMENSIONS = 4
SIGMA = 0.1
VARIANT_EFFECT = {0: 0.0, 1: 5.0, 2: -5.0, 3: 2.0}
NOISE = 0.3
"""Sampling noise of a child's fitness: three times the spread of a direction's own effect."""


def unit(seed: int, size: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=size)
    return vector / np.linalg.norm(vector)


def noise_of(seed: int | None) -> float:
    """What a sampled answer adds to its child's fitness: a pure function of its sampling stream."""
    digest = hashlib.sha256(str(seed).encode()).digest()
    return NOISE * float(np.random.default_rng(int.from_bytes(digest[:8], "little")).normal())


@dataclass
class SyntheticContext:
    """The part of `coevo.context.Context` a heuristic generation of `coevo` uses, over a linear model."""

    engine: ESEngine
    model: torch.nn.Linear
    gradient: np.ndarray
    antithetic: bool
    population: Population
    prompts: PromptPool
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    generation: int = 1
    budget_left: int = 1000
    told: list[float | None] = field(default_factory=list)

    def ask(self):
        return self.engine.ask()

    def tell(self, perturbations, rewards):
        self.told = list(rewards)
        return self.engine.tell(perturbations, rewards)

    def propose(self, requests, perturbations, prompt_ids):
        sampling = replace(SamplingParams(seed=7), requests_per_stream=2 if self.antithetic else 1)
        children = []
        for index, (request, member, prompt) in enumerate(zip(requests, perturbations, prompt_ids, strict=True)):
            with self.engine.host.perturbed(member):
                weights = self.model.weight.detach().double().numpy().ravel()
            parent = max(p.objective for p in request.parents)
            variant = next(i for i, v in enumerate(self.prompts.variants) if v.id == prompt)
            fitness = (
                parent + VARIANT_EFFECT[variant] + float(weights @ self.gradient) + noise_of(sampling.seed_for(index))
            )
            code = f"def h(x):\n    return {index}  # {fitness}\n"
            children.append(
                Candidate(
                    code=code, thought="", operator=request.operator, generation=1, fitness=fitness, objective=fitness
                )
            )
        self.budget_left = 0  # no prompt rewrite: this test is about the weights' side
        return children


def variants() -> list[PromptVariant]:
    templates = default_templates()
    return [PromptVariant(f"v{i}", templates, notes=f"variant {i}") for i in range(4)]


def parents() -> list[Candidate]:
    return [
        Candidate(
            code=f"def h(x):\n    return x + {i}\n",
            thought="",
            operator="library",
            generation=0,
            fitness=f,
            objective=f,
        )
        for i, f in enumerate((10.0, 8.0, 3.0, 1.0))
    ]


def update_cosine(seed: int, antithetic: bool, reward: str = "quality") -> tuple[float, list[float | None]]:
    config = validate(
        {
            "method": "coevo",
            "task": "tsp_construct",
            "population_size": 16,
            "budget": 100,
            "seed": seed,
            "es": {"antithetic": antithetic, "reward": reward, "sigma": SIGMA},
            "settings": {"prompt_pool": 4, "operators": ["m1"]},
        }
    )
    method = build_method(config, HEURISTICS)
    model = torch.nn.Linear(DIMENSIONS, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    engine = ESEngine(
        ESConfig(
            population_size=16, sigma=SIGMA, alpha=1.0, shaping=config.es.shaping, antithetic=antithetic, seed=seed
        ),
        TorchWeightsHost(model),
    )
    gradient = unit(seed, DIMENSIONS)
    context = SyntheticContext(
        engine,
        model,
        gradient,
        antithetic,
        Population(4, parents()),
        PromptPool(4, variants()),
        np.random.default_rng(seed),
    )
    method.prompts_generation(context)
    step = model.weight.detach().double().numpy().ravel()
    return float(step @ gradient / np.linalg.norm(step)), context.told


@pytest.mark.parametrize("seed", range(6))
def test_mirrored_pairs_point_the_update_along_the_true_gradient(seed):
    cosine, told = update_cosine(seed, antithetic=True)
    assert cosine > 0.5
    residuals = engine_residuals(told)
    assert all(r != 0 for r in residuals), "every member informs ES"


def engine_residuals(told: list[float | None]) -> list[float]:
    """What the engine shapes from mirrored pairs: each reward less its pair's mean."""
    values = np.array(told, dtype=float)
    return list(values - np.repeat(values.reshape(-1, 2).mean(1), 2))


def test_without_mirrored_pairs_the_text_and_sampler_drown_the_direction():
    """Independent members told the reference's improvement reward: on the same workload the updates
    point nowhere in particular on average (the variant's and sampler's effects dwarf the direction's)."""
    cosines = [update_cosine(seed, antithetic=False, reward="improvement")[0] for seed in range(6)]
    paired = [update_cosine(seed, antithetic=True)[0] for seed in range(6)]
    assert np.mean(cosines) < 0.5 < min(paired)


def test_a_population_that_does_not_fill_whole_pairs_per_variant_is_refused():
    config = validate(
        {
            "method": "coevo",
            "task": "tsp_construct",
            "population_size": 8,
            "budget": 100,
            "settings": {"prompt_pool": 3},
        }
    )
    with pytest.raises(ConfigError, match=r"multiple of 6 \(2 members a pair x settings.prompt_pool 3\)"):
        build_method(config, HEURISTICS)
