"""Which class loads each `llm.backend` name: backends are plugins, coevo's own included.

`llm.backend` is a name registered under the entry-point group ``coevo.backends`` (coevo registers
``transformers``, ``vllm`` and ``openai`` there, as any installed package can), or
``path/to/file.py:Class`` / ``package.module:Class``. A backend class declares
  * ``load(config, dtype) -> LLM``: the backend for `config.model` (`dtype`: the compute dtype a resume
    recorded, else None), raising `coevo.run.config.ConfigError` (one line) for a model it cannot load;
  * optionally ``check(config)``: raise ValueError (one line) when the run config cannot run on it,
    which the config calls while it validates, before any model loads;
  * optionally ``options_model``: the pydantic model of its own keys, the `engine_options` table of
    `[llm]` or of an `[[llm.ensemble]]` entry (without one, the backend takes none).
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from coevo.plugins import Registry

BACKENDS = Registry(
    "coevo.backends",
    "backend",
    lambda cls: None if callable(getattr(cls, "load", None)) else "it needs load(config, dtype)",
)
backend_class = BACKENDS.get


def checked_options(backend: str, options: dict) -> BaseModel | None:
    """`options` (a model's `engine_options`) validated by backend `backend`'s `options_model`; a
    ValueError in one line when they do not fit, or when the backend takes none."""
    model = getattr(backend_class(backend), "options_model", None)
    if model is None:
        if options:
            raise ValueError(f"llm.engine_options: the {backend} backend takes none, got {', '.join(options)}")
        return None
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ValueError(f"llm.engine_options.{where}: {error['msg']}") from None
