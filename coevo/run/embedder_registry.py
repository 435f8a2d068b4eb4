"""Which class builds the novelty check's embedder (`novelty.embedder`): embedders are plugins.

`novelty.embedder` is ``hidden-states`` (the default, `coevo.llm.embedding.HiddenStateEmbedder`), a
name an installed package registers under the entry-point group ``coevo.embedders``, or
``path/to/file.py:Class`` / ``package.module:Class``. An embedder class declares
``from_config(config, llm) -> Embedder`` (`coevo.llm.embedding.Embedder`): the embedder a run of
`config` uses, `llm` being the run's loaded backend, which it may reuse.
"""

from __future__ import annotations

from coevo.plugins import PluginError, is_spec, load, registered

GROUP = "coevo.embedders"

BUILT_IN = {"hidden-states": "coevo.llm.embedding:HiddenStateEmbedder"}
"""Names that need no registration; the class is imported (with torch) only when a run builds it."""


def embedder_class(name: str) -> type:
    """The class of embedder `name`; PluginError (one line) when it cannot be found, loaded, or has no
    `from_config`."""
    if not is_spec(name) and name not in BUILT_IN and name not in registered(GROUP):
        known = ", ".join([*BUILT_IN, *registered(GROUP)])
        raise PluginError(
            f"unknown embedder {name!r}; known embedders: {known} (or name one as path/to/file.py:Class "
            "or package.module:Class)"
        )
    cls = load(GROUP, BUILT_IN.get(name, name), "embedder")
    if not callable(getattr(cls, "from_config", None)):
        raise PluginError(
            f"embedder {name!r}: {cls.__qualname__} is not an embedder (it needs from_config(config, llm))"
        )
    return cls
