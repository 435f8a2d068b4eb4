"""The run side of model ensembles: the models of `[[llm.ensemble]]` loaded beside the run's own, the
bandit's evidence read back from the run store, and the router the operators write with.

The evidence is recomputed from the store at every call, never kept in memory, so the choices are a
function of what the store holds: a resumed run, whose store ends at its last committed step, chooses
exactly as the uninterrupted run did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from coevo.llm.bandit import Pull
from coevo.llm.base import LLM
from coevo.llm.ensemble import EnsembleLLM
from coevo.run.build import load_llm
from coevo.run.config import RunConfig, arm_config
from coevo.run.model_source import ModelSource
from coevo.run.store import RunStore

DTYPES_KEY = "ensemble_dtypes"
"""Run-store meta key: the float type each local model of the ensemble computes in, which its texts
depend on (the run's own model has its own key, `coevo.run.session.COMPUTE_DTYPE_KEY`)."""


def operators_llm(config: RunConfig, llm: LLM, store: RunStore) -> LLM:
    """What the operators write with: `llm` itself in a run of one model, else the router over it (first)
    and the config's ensemble, choosing from the children `store` holds."""
    if not config.llm.ensemble:
        return llm
    models = {config.model: llm, **load_models(config, store)}
    prices = {config.model: config.llm, **{entry.label: entry for entry in config.llm.ensemble}}
    priced = prices if config.llm.priced else None
    return EnsembleLLM(models, lambda: pulls(store, priced), config.llm.ensemble_exploration)


def load_models(config: RunConfig, store: RunStore) -> dict[str, LLM]:
    """The entries' models by name, each in the float type the store recorded for it (recorded on the
    first load, so a resume computes in it again)."""
    try:
        recorded: dict[str, str] | None = json.loads(store.meta(DTYPES_KEY))
    except KeyError:
        recorded = None
    models = {
        entry.label: load_llm(arm_config(config, entry), (recorded or {}).get(entry.label))
        for entry in config.llm.ensemble
    }
    if recorded is None:
        dtypes = {name: getattr(model, "compute_dtype", None) for name, model in models.items()}
        store.set_meta(DTYPES_KEY, json.dumps({name: dtype for name, dtype in dtypes.items() if dtype is not None}))
    return models


def pulls(store: RunStore, prices: Mapping[str, ModelSource] | None = None) -> list[Pull]:
    """The bandit's evidence: each child a model wrote from parents under weights the bandit chose (an ES
    member's perturbed weights were not its choice), judged against its best parent, with what it spent:
    completion tokens, or the call's cost at `prices` (model name -> its settings)."""
    fitness: dict[str, float | None] = {}
    for _, candidate in store.candidates():
        fitness.setdefault(candidate.key, candidate.fitness)
    evidence = []
    for child in store.model_children():
        candidate = child.candidate
        if candidate.weights is not None and candidate.weights.seed is not None:
            continue
        judged = [fitness[key] for key in candidate.parents if fitness.get(key) is not None]
        if not judged:
            continue
        improvement = None if candidate.fitness is None else candidate.fitness - max(judged)
        if prices is None:
            spent = float(max(child.completion_tokens, 1))
        else:
            spent = prices[child.model].cost(child.prompt_tokens, child.completion_tokens)
        evidence.append(Pull(child.model, improvement, spent))
    return evidence
