"""Code embeddings for the novelty check (`coevo.novelty`): the `Embedder` protocol and the default, the
mean-pooled last hidden layer of a local causal LM.

The default needs no embedding model of its own: it reads the run's transformers model where the run
has one loaded (and so no second copy is held in memory), else the shipped embedded model through the
usual offline loader. Any other embedder (a packaged sentence-embedding model) only has to satisfy
`Embedder`; `novelty.embedder` names its class (`coevo.run.embedder_registry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import torch

from coevo.llm.embedded import DEFAULT_MODEL
from coevo.llm.hf import HFBackend

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from coevo.llm.base import LLM


class RunDtype(Protocol):
    """What the default embedder reads of a run's config (`coevo.run.config.RunConfig`)."""

    @property
    def compute_dtype(self) -> str: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors whose cosine says how alike the texts are."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order."""
        ...


class HiddenStateEmbedder:
    """The mean, over a text's tokens, of a causal LM's last hidden layer (no language-model head).

    Texts go through the model one at a time, so a text's vector does not depend on what it was
    embedded with (padding would change the rounding of a batch's rows). Under ES the model's live
    weights move; a vector is computed once per candidate and kept (`coevo.novelty.NoveltyCheck`).
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = f"hidden-states:{name}"

    @classmethod
    def from_config(cls, config: RunDtype, llm: LLM) -> HiddenStateEmbedder:
        """Over the run's own transformers model where it has one, else over the embedded default model,
        loaded as the transformers backend loads it, in the run's compute dtype."""
        if not (hasattr(getattr(llm, "model", None), "base_model") and getattr(llm, "tokenizer", None) is not None):
            llm = HFBackend.load(DEFAULT_MODEL, dtype=config.compute_dtype)
        return cls(llm.model, llm.tokenizer, llm.name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        with torch.no_grad():
            for text in texts:
                encoded = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.model.device)
                hidden = self.model.base_model(**encoded).last_hidden_state[0]
                rows.append(hidden.float().mean(dim=0).cpu().numpy())
        width = self.model.config.hidden_size
        return np.array(rows, dtype=np.float32).reshape(len(rows), width)
