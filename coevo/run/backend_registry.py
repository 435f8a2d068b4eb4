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

from coevo.plugins import PluginError, load, registered

GROUP = "coevo.backends"


def backend_names() -> tuple[str, ...]:
    """Every backend a config may name without a spec (registered in ``coevo.backends``)."""
    return tuple(registered(GROUP))


def backend_class(name: str) -> type:
    """The class of backend `name`; PluginError (one line, listing the registered backends for an
    unknown name) when it cannot be found, loaded, or has no `load`."""
    cls = load(GROUP, name, "backend")
    if not callable(getattr(cls, "load", None)):
        raise PluginError(f"backend {name!r}: {cls.__qualname__} is not a backend (it needs load(config, dtype))")
    return cls
