"""Opening runs: the backend a config names, a new run directory, or a stored run to resume.

The checks that a user can fail (bad config, missing model, weight method on a prompt-only backend,
unreadable run directory) all raise `ConfigError` or `StoreError` before any expensive work starts.
"""

from __future__ import annotations

import importlib
import re
import time
from pathlib import Path

from coevo.llm.base import LLM
from coevo.run.config import ConfigError, RunConfig, validate
from coevo.run.executor import open_executor
from coevo.run.runner import Runner
from coevo.run.store import RunStore

COMPUTE_DTYPE_KEY = "compute_dtype"
"""Run-store meta key: the float type the run's in-process model computed in."""
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


def default_run_dir(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.subject}-{config.method.replace('+', '_')}-s{config.seed}-{stamp}"


def start_run(
    config: RunConfig, run_dir: Path, llm: LLM | None = None, executor: str = "local", address: str | None = None
) -> Runner:
    """A runner over a new store in `run_dir` (the backend is loaded unless given), playing its members
    on `executor` (`address`: the Ray cluster to join)."""
    members = open_executor(executor, config, address)
    llm = llm or load_llm(config)
    store = RunStore.create(run_dir, config.model_dump(mode="json"))
    if (dtype := getattr(llm, "compute_dtype", None)) is not None:
        store.set_meta(COMPUTE_DTYPE_KEY, dtype)  # the texts depend on it; a resume computes in it again
    return Runner(config, store, run_dir, llm, executor=members)


def resume_run(
    run_dir: Path, llm: LLM | None = None, executor: str = "local", address: str | None = None
) -> Runner:
    """A runner continuing the run stored in `run_dir` after its last committed step, on `executor`."""
    store = RunStore.open(run_dir)
    try:
        config = validate(store.config)
        members = open_executor(executor, config, address)
    except ConfigError:
        store.close()
        raise
    try:
        recorded = store.meta(COMPUTE_DTYPE_KEY)
    except KeyError:  # a run from before the key: they all computed in fp32
        recorded = "float32"
    return Runner(config, store, run_dir, llm or load_llm(config, recorded), executor=members)
