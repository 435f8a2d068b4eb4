"""The lean decode loop: the same tokens as transformers' `generate` from the same per-row streams, with
rows dropped as they end and a shared prompt prefix computed once and reused under the same weights."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from tiny_lm import build_tiny_llama, build_tiny_tokenizer

from coevo.es.perturbation import Perturbation
from coevo.llm.base import Message, SamplingParams
from coevo.llm.hf import HFBackend

RULES = "write a short heuristic for the travelling salesman problem one two three four five six seven eight"
ASKS = ["the cat sat on the mat", "a dog ran", "red green blue yellow black white", "nine ten"]
SETTINGS = [
    SamplingParams(max_new_tokens=12, temperature=1.0, top_p=0.95, seed=1),
    SamplingParams(max_new_tokens=5, temperature=0.0, seed=2),
    SamplingParams(max_new_tokens=9, temperature=0.7, top_p=0.8, seed=3, stop=("dog",)),
    SamplingParams(max_new_tokens=12, temperature=1.3, top_p=1.0, seed=4),
]


def conversation(ask: str) -> list[Message]:
    return [{"role": "system", "content": RULES}, {"role": "user", "content": ask}]


def tiny_pair(eos_token_id: int | None = None) -> tuple[HFBackend, HFBackend]:
    """The same tiny model behind the lean loop and behind `generate`."""
    tokenizer = build_tiny_tokenizer()
    overrides = {} if eos_token_id is None else {"eos_token_id": eos_token_id}
    model = build_tiny_llama(tokenizer.vocab_size, **overrides)
    return (
        HFBackend(model, tokenizer, name="tiny", decode="lean"),
        HFBackend(model, tokenizer, name="tiny", decode="generate"),
    )


def outcome(backend: HFBackend, items) -> list[tuple]:
    return [(c.token_ids, c.text, c.finish_reason, c.completion_tokens) for c in backend.generate_each(items)]


def test_lean_decoding_gives_generates_tokens_for_mixed_settings_and_ends() -> None:
    lean, reference = tiny_pair()
    items = [(conversation(ask), sampling) for ask, sampling in zip(ASKS, SETTINGS, strict=True)]
    expected = outcome(reference, items)
    assert len({tokens for tokens, *_ in expected}) == 4 and len({n for *_, n in expected}) > 1  # rows end apart
    assert outcome(lean, items) == expected
    assert [outcome(lean, [item])[0] for item in items] == expected  # alone: no shared prefix, no dropping


def test_a_shared_prefix_is_reused_only_under_the_same_weights() -> None:
    lean, reference = tiny_pair()
    first = [(conversation(ask), sampling) for ask, sampling in zip(ASKS, SETTINGS, strict=True)]
    later = [(conversation(ask[::-1]), replace(sampling, seed=9)) for ask, sampling in zip(ASKS, SETTINGS, strict=True)]
    outcome(lean, first)
    assert outcome(lean, later) == outcome(reference, later)  # the stored prefix, reused
    with lean.host.perturbed(Perturbation(seed=5, sigma=0.5)):
        perturbed = outcome(lean, later)
        assert perturbed == outcome(reference, later)  # not the prefix of the base weights
    assert perturbed != outcome(reference, later)


def test_listeners_get_each_rows_text_in_deltas_that_join_to_its_answer() -> None:
    lean, reference = tiny_pair()
    items = [(conversation(ask), sampling) for ask, sampling in zip(ASKS, SETTINGS, strict=True)]
    for backend in (lean, reference):
        deltas: list[list[str]] = [[] for _ in items]
        listeners = [row.append for row in deltas[:-1]] + [None]  # the last request is not streamed
        completions = backend.generate_each(items, listeners)
        assert ["".join(row) for row in deltas[:-1]] == [c.text for c in completions[:-1]]
        assert deltas[-1] == [] and [c.text for c in completions] == [c.text for c in backend.generate_each(items)]
        pieces = [len(row) for row in deltas[:-1]]
        if backend is reference:  # transformers' generate gives the text once the batch is done
            assert pieces == [1 if c.text else 0 for c in completions[:-1]]
        else:  # the lean loop, a token at a time
            assert sum(pieces) > 2 * len(pieces)


def test_an_unknown_decode_loop_is_refused() -> None:
    tokenizer = build_tiny_tokenizer()
    with pytest.raises(ValueError, match="decode must be"):
        HFBackend(build_tiny_llama(tokenizer.vocab_size), tokenizer, name="tiny", decode="fast")  # type: ignore


@pytest.mark.slow
def test_smollm2_greedy_lean_equals_generate_on_agent_turns() -> None:
    """The embedded model, greedy, on gridnav prompts that share their rules (~20 s)."""
    from tasks.agents import make_env

    torch.manual_seed(0)
    lean = HFBackend.load(dtype="float32", decode="lean")
    reference = HFBackend(lean.model, lean.tokenizer, name=lean.name, decode="generate")
    env = make_env("gridnav", 2)
    greedy = SamplingParams(max_new_tokens=24, temperature=0.0, stop=("\n",))
    items = [([{"role": "user", "content": env.reset(seed)}], greedy) for seed in range(4)]
    assert outcome(lean, items) == outcome(reference, items)
