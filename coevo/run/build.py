"""What a run is built of, from its config alone: the method, the LLM backend, the weights host and the workload.
The local runner and a Ray worker build them with the same calls, so a worker's replica is the driver's;
the method, the workload and the backend are each one registry lookup (`coevo.methods`, `coevo.workloads`,
`coevo.backends`), so nothing here names a kind.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from coevo.context import Policy
from coevo.es.protocols import WeightsHost
from coevo.evaluate.evaluator import Evaluator
from coevo.family import Family
from coevo.llm.base import LLM, WeightsBackend
from coevo.plugins import PluginError
from coevo.run.backend_registry import backend_class
from coevo.run.config import ConfigError, RunConfig
from coevo.run.method_registry import method_class
from coevo.run.workload_registry import workload_class
from coevo.workload import Workload
from tasks.base import SplitName


def build_method(config: RunConfig, family: Family) -> Policy:
    """The config's method for a run of `family`, built from its own `[settings]` (validated by its
    `settings_model`) and the run's facts: a method never holds the whole config."""
    cls = method_class(config.method)
    settings = None if cls.settings_model is None else cls.settings_model.model_validate(config.settings)
    return cls(settings, config.facts, family)


def build_workload(
    config: RunConfig, llm: LLM | None, host: WeightsHost | None = None, cache_dir: Path | None = None
) -> Workload:
    """The workload a run's `[workload]` table names, built by its class from its own settings and the
    run's facts, played or written by `llm` under `host`'s weights, with the run's sandbox at hand for
    code it scores (`cache_dir`: where that sandbox caches verdicts)."""
    sandbox = partial(configured_evaluator, config, config.eval.split, cache_dir)
    return workload_class(config.workload.kind).build(config.workload, config.facts, llm, host, sandbox)


def configured_evaluator(config: RunConfig, split: SplitName, cache_dir: Path | None = None) -> Evaluator:
    """The evaluator of `config.task` on `split` under the run's eval settings (instance limit, workers)."""
    settings = config.eval
    return Evaluator(config.task, split, limit=settings.limit, workers=settings.workers, cache_dir=cache_dir)


def build_host(llm: LLM, config: RunConfig) -> WeightsHost:
    """The weights host an ES method drives, as the backend builds it over its own weights.

    A backend that is not a `WeightsBackend` but exposes its torch module as `model` (test doubles,
    user factories) gets the torch host over that module.
    """
    model = getattr(llm, "model", None)
    if not getattr(llm, "supports_weights", False) or not (isinstance(llm, WeightsBackend) or model is not None):
        raise ConfigError(f"method {config.method} evolves weights, but backend {llm.name!r} is prompt-only")
    try:
        if isinstance(llm, WeightsBackend):
            return llm.weights_host(config.es.scope, config.es.rank)
        from coevo.es.hosts import module_host

        return module_host(model, config.es.scope, config.es.rank)
    except ValueError as exc:
        raise ConfigError(f"method {config.method}: {exc}") from None


def load_llm(config: RunConfig, dtype: str | None = None) -> LLM:
    """The LLM of the backend `llm.backend` names, loaded for `config.model`; `dtype` replaces the
    config's compute dtype (a resume passes the one its run recorded)."""
    try:
        backend = backend_class(config.llm.backend)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    return backend.load(config, dtype)
