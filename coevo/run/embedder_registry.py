"""Which class builds the novelty check's embedder (`novelty.embedder`): embedders are plugins.

`novelty.embedder` is ``hidden-states`` (the default, `coevo.llm.embedding.HiddenStateEmbedder`), a
name an installed package registers under the entry-point group ``coevo.embedders``, or
``path/to/file.py:Class`` / ``package.module:Class``. An embedder class declares
``from_config(config, llm) -> Embedder`` (`coevo.llm.embedding.Embedder`): the embedder a run of
`config` uses, `llm` being the run's loaded backend, which it may reuse.
"""

from __future__ import annotations

from coevo.plugins import Registry

BUILT_IN = {"hidden-states": "coevo.llm.embedding:HiddenStateEmbedder"}
"""Names that need no registration; the class is imported (with torch) only when a run builds it."""

EMBEDDERS = Registry(
    "coevo.embedders",
    "embedder",
    lambda cls: None if callable(getattr(cls, "from_config", None)) else "it needs from_config(config, llm)",
    BUILT_IN,
)
embedder_class = EMBEDDERS.get
