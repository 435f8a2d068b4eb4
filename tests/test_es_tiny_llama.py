"""ES on a tiny random LlamaForCausalLM raises a verifiable reward on its generated text."""

import pytest
import torch
from tiny_lm import build_tiny_llama
from transformers import LlamaForCausalLM

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost

VOCAB = 32  # a trivial vocabulary: token ids are the text
PROMPTS = torch.randint(1, VOCAB, (8, 4), generator=torch.Generator().manual_seed(1))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_llama() -> LlamaForCausalLM:
    # No end-of-sequence token: every greedy continuation runs its full length.
    return build_tiny_llama(
        VOCAB, initializer_range=0.05, max_position_embeddings=64, bos_token_id=0, eos_token_id=None
    )


def greedy_continuations(model: LlamaForCausalLM) -> torch.Tensor:
    with torch.no_grad():
        output = model.generate(
            PROMPTS, attention_mask=torch.ones_like(PROMPTS), max_new_tokens=12, do_sample=False, pad_token_id=0
        )
    return output[:, PROMPTS.shape[1] :]


def test_es_raises_the_frequency_of_a_rare_token_in_greedy_outputs_within_three_generations():
    model = tiny_llama()
    base = greedy_continuations(model)
    counts = torch.bincount(base.reshape(-1), minlength=VOCAB)
    target = min((t for t in range(VOCAB) if counts[t] > 0), key=lambda t: (counts[t], t))  # rarest emitted

    def target_frequency() -> float:
        return float((greedy_continuations(model) == target).float().mean())

    host = TorchWeightsHost(model, scope="full")
    engine = ESEngine(ESConfig(population_size=8, antithetic=True, sigma=0.02, alpha=0.05), host)
    start = target_frequency()
    for _ in range(3):
        perturbations = engine.ask()
        rewards = []
        for p in perturbations:
            with host.perturbed(p):
                rewards.append(target_frequency())
        engine.tell(perturbations, rewards)
    assert start < 0.1
    assert target_frequency() >= 0.25
