"""Which class loads each `llm.backend` name: backends are plugins, coevo's own included.

`llm.backend` is a name registered under the entry-point group ``coevo.backends`` (coevo registers
``transformers``, ``vllm`` and ``openai`` there, as any installed package can), or
``path/to/file.py:Class`` / ``package.module:Class``. A backend class declares
  * ``load(config, dtype) -> LLM``: the backend for `config.model` (`dtype`: the compute dtype a resume
    recorded, else None), raising `coevo.run.config.ConfigError` (one line) for a model it cannot load;
  * optionally ``check(config)``: raise ValueError (one line) when the run config cannot run on it,
    which the config calls while it validates, before any model loads.
"""

from __future__ import annotations

from coevo.plugins import Registry

BACKENDS = Registry(
    "coevo.backends",
    "backend",
    lambda cls: None if callable(getattr(cls, "load", None)) else "it needs load(config, dtype)",
)
backend_class = BACKENDS.get
