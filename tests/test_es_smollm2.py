"""Three ES generations on the real embedded SmolLM2-135M, then an exact replay of its history (slow)."""

import pytest
import torch

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.es.update_log import ESHistory, replay
from coevo.llm.hf import ModelNotFoundError, load_causal_lm

PROMPTS = ["The capital of France is", "def add(a, b):"]


def load_or_skip():
    try:
        return load_causal_lm()
    except ModelNotFoundError as error:
        pytest.skip(f"embedded model not installed: {error}")


def greedy_text_and_confidence(model, tokenizer) -> tuple[torch.Tensor, float]:
    """Greedy continuations and the mean log-probability of their tokens (a reward that moves smoothly)."""
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(
            **batch,
            max_new_tokens=8,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=tokenizer.pad_token_id,
        )
    tokens = output.sequences[:, batch["input_ids"].shape[1] :]
    log_probs = torch.stack(output.logits, dim=1).log_softmax(-1).gather(-1, tokens[..., None])
    return tokens, float(log_probs.mean())


@pytest.mark.slow
def test_three_generations_on_smollm2_replay_to_the_same_weights_and_text(tmp_path):
    model, tokenizer = load_or_skip()
    host = TorchWeightsHost(model, scope="all_linear")
    # The reference's scale (sigma 1e-3, alpha 5e-4), one mirrored pair per generation to stay short.
    engine = ESEngine(
        ESConfig(population_size=2, antithetic=True, sigma=1e-3, alpha=5e-4), host, ESHistory(tmp_path / "h.jsonl")
    )
    for _ in range(3):
        members = engine.ask()
        rewards = []
        for member in members:
            with host.perturbed(member):
                rewards.append(greedy_text_and_confidence(model, tokenizer)[1])
        assert engine.tell(members, rewards).update is not None

    fresh, _ = load_causal_lm()
    assert TorchWeightsHost(fresh).weights_sha256() != host.weights_sha256()
    replayed = replay(fresh, ESHistory(tmp_path / "h.jsonl"))
    assert replayed.weights_sha256() == host.weights_sha256()
    assert torch.equal(greedy_text_and_confidence(fresh, tokenizer)[0], greedy_text_and_confidence(model, tokenizer)[0])
