"""A fast, deterministic stand-in for the novelty check's embedder: hashed character trigrams.

Codes that share most of their text (the scripted LLM's heuristics differ in one coefficient) come out
close, others apart, as with a real embedder. Every text it embeds is logged in `EMBEDDED`, so tests can
tell what was computed and what came from the cache. Use it in a config as
`novelty.embedder = "fake_embedder:TrigramEmbedder"` (with tests/ on the Python path).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

EMBEDDED: list[str] = []
WIDTH = 256


class TrigramEmbedder:
    name = "trigrams"

    @classmethod
    def from_config(cls, config, llm) -> TrigramEmbedder:
        return cls()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        EMBEDDED.extend(texts)
        rows = np.zeros((len(texts), WIDTH), dtype=np.float32)
        for row, text in enumerate(texts):
            for start in range(len(text) - 2):
                digest = hashlib.blake2b(text[start : start + 3].encode(), digest_size=2).digest()
                rows[row, int.from_bytes(digest, "little") % WIDTH] += 1.0
        return rows
