"""coevo's own LLM backends, each the loader an `llm.backend` name is registered with
(`coevo.run.backend_registry`): a local model in transformers, a local model in vLLM, and an
OpenAI-compatible server. The heavy engines are imported only by the backend a run names.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from coevo.run.config import ConfigError

if TYPE_CHECKING:
    from coevo.llm.base import LLM
    from coevo.run.config import RunConfig

_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
"""`model = "module:factory"`: a callable that builds the LLM from the run config."""


class VLLMOptions(BaseModel):
    """`engine_options` of the vllm backend: passed to `vllm.LLM`, the common ones checked here."""

    model_config = ConfigDict(extra="allow", frozen=True)

    dtype: str | None = Field(None, description="the engine's dtype (float32, bfloat16, ...)")
    max_model_len: int | None = Field(None, ge=1, description="the longest prompt and answer, in tokens")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="the share of GPU memory vLLM takes")
    enforce_eager: bool | None = None


class Transformers:
    """The default: a local model (embedded name or directory) in transformers, or the LLM a
    `module:factory` model spec builds from the config."""

    @staticmethod
    def load(config: RunConfig, dtype: str | None = None) -> LLM:
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


class VLLM:
    """A vLLM engine over the model's local directory (an embedded model is converted once, as for
    transformers), loaded with the scope the ES methods evolve and the run's seed; it perturbs and
    updates full-rank members inside vLLM's workers."""

    options_model = VLLMOptions

    @staticmethod
    def check(config: RunConfig) -> None:
        if config.llm.api_base is not None:
            raise ValueError("llm.backend = 'vllm' runs a local model; drop llm.api_base")
        if importlib.util.find_spec("vllm") is None:
            from coevo.llm.vllm import INSTALL_HINT

            raise ValueError(f"llm.backend = 'vllm' needs vLLM, which is not installed here: {INSTALL_HINT}")
        if config.es.rank:
            raise ValueError("the vLLM backend evolves full-rank members only: set es.rank = 0")

    @staticmethod
    def load(config: RunConfig, dtype: str | None = None) -> LLM:
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


class OpenAICompatible:
    """Chat completions from the OpenAI-compatible server at `llm.api_base` (prompt-only). A config
    that sets `llm.api_base` and no other backend runs here."""

    @staticmethod
    def check(config: RunConfig) -> None:
        if config.llm.api_base is None:
            raise ValueError("llm.backend = 'openai' needs llm.api_base, the server's URL")
        if config.uses_weights:
            raise ValueError(
                f"method {config.method} evolves weights, but llm.api_base names a prompt-only server; "
                "use a local model or a prompt-only method (sample, eoh)"
            )

    @staticmethod
    def load(config: RunConfig, dtype: str | None = None) -> LLM:
        from coevo.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(config.llm.api_base, config.model)
