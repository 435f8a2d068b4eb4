"""What a run is built of, from its config alone: the LLM backend, the weights host, the evaluator and
the workload. The local runner and a Ray worker build them with the same calls, so a worker's replica
is the driver's; this is the one place that branches on the workload's kind.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from coevo.agent_workload import AgentWorkload
from coevo.es.protocols import WeightsHost
from coevo.evaluate.evaluator import Evaluator
from coevo.heuristic_workload import AHDWorkload
from coevo.llm.base import LLM, WeightsBackend
from coevo.run.config import ConfigError, RunConfig
from coevo.workload import Workload
from tasks.agents.splits import env_seeds
from tasks.base import SplitName


def build_workload(
    config: RunConfig, llm: LLM | None, host: WeightsHost | None = None, cache_dir: Path | None = None
) -> Workload:
    """The workload a run's `[workload]` section asks for: the AHD task's evaluator on `eval.split`
    (`cache_dir`: its verdict cache), or the environment's search episodes in windows of
    `workload.episodes`, played by `llm` under `host`'s weights."""
    settings = config.workload
    if settings.kind == "agent":
        return AgentWorkload(
            llm,
            settings.env,
            settings.agent_horizon,
            tuple(env_seeds(settings.env, "search")),
            host=host,
            seed=config.seed,
            window=settings.episodes,
            heldout=settings.heldout,
            heldout_limit=settings.heldout_episodes,
        )
    return AHDWorkload(configured_evaluator(config, config.eval.split, cache_dir))


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


_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_llm(config: RunConfig, dtype: str | None = None) -> LLM:
    """The backend for `config.model`: an OpenAI-compatible server, a `module:factory`, or a local model
    (in transformers, or in vLLM where `llm.backend` says so); `dtype` replaces the config's compute dtype
    (a resume passes the one its run recorded)."""
    if config.llm.backend == "vllm":
        return _load_vllm(config)
    if config.llm.api_base is not None:
        from coevo.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(config.llm.api_base, config.model)
    if _FACTORY.match(config.model) and not Path(config.model).exists():
        module_name, factory_name = config.model.split(":")
        try:
            factory = getattr(importlib.import_module(module_name), factory_name)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"model factory {config.model!r} cannot be imported: {exc}") from None
        return factory(config)
    from coevo.llm.embedded import ModelNotFoundError
    from coevo.llm.hf import HFBackend

    try:
        return HFBackend.load(
            config.model, max_batch_size=config.llm.max_batch_size, dtype=dtype or config.compute_dtype
        )
    except ModelNotFoundError as exc:
        raise ConfigError(str(exc)) from None


def _load_vllm(config: RunConfig) -> LLM:
    """A vLLM engine over the model's local directory (an embedded model is converted once, as for
    transformers), loaded with the scope the ES methods evolve and the run's seed."""
    from coevo.llm.embedded import ModelNotFoundError
    from coevo.llm.hf import resolve_model_dir
    from coevo.llm.vllm import VLLMBackend

    try:
        model_dir = resolve_model_dir(config.model)
    except ModelNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    options = {"seed": config.seed, "max_num_seqs": config.llm.max_batch_size, **config.llm.engine_options}
    try:
        return VLLMBackend(str(model_dir), scope=config.es.scope, name=config.model, **options)
    except ValueError as exc:
        raise ConfigError(f"llm.backend = 'vllm': {str(exc).splitlines()[0]}") from None
