"""Three ES generations on the real embedded SmolLM2-135M, then an exact replay of its history (slow)."""

import pytest
import torch

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.history import ESHistory, replay
from coevo.es.host import TorchWeightsHost
from coevo.llm.hf import ModelNotFoundError, load_causal_lm

PROMPTS = ["The capital of France is", "def add(a, b):"]


def load_or_skip():
    try:
        return load_causal_lm()
    except ModelNotFoundError as error:
        pytest.skip(f"embedded model not installed: {error}")


def greedy_tokens(model, tokenizer) -> torch.Tensor:
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(**batch, max_new_tokens=16, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return output[:, batch["input_ids"].shape[1] :]


@pytest.mark.slow
def test_three_generations_on_smollm2_replay_to_the_same_weights_and_text(tmp_path):
    model, tokenizer = load_or_skip()
    space = tokenizer.encode(" ", add_special_tokens=False)[0]
    host = TorchWeightsHost(model, scope="all_linear")
    # The reference's Sudoku/AHD scale: sigma 1e-3, alpha 5e-4.
    config = ESConfig(population_size=4, antithetic=True, sigma=1e-3, alpha=5e-4)
    engine = ESEngine(config, host, ESHistory(tmp_path / "history.jsonl"))
    for _ in range(3):
        members = engine.ask()
        rewards = []
        for member in members:
            with host.perturbed(member):
                rewards.append(float((greedy_tokens(model, tokenizer) != space).float().mean()))
        stats = engine.tell(members, rewards)
        assert stats.n_valid == len(members)

    fresh, _ = load_causal_lm()
    assert TorchWeightsHost(fresh).weights_sha256() != host.weights_sha256()
    replayed = replay(fresh, ESHistory(tmp_path / "history.jsonl"))
    assert replayed.weights_sha256() == host.weights_sha256()
    assert torch.equal(greedy_tokens(fresh, tokenizer), greedy_tokens(model, tokenizer))
