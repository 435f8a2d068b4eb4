"""End to end on the real embedded SmolLM2: engine + host + history for 3 ES generations."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.history import ESHistory, replay
from coevo.es.host import TorchWeightsHost
from coevo.llm.hf import load_causal_lm

PROMPTS = ["Name a prime number.", "Write one Python keyword."]
NEW_TOKENS = 4


@pytest.mark.slow
def test_three_generations_change_the_weights_and_replay_to_the_same_hash(tmp_path: Path) -> None:
    model, tokenizer = load_causal_lm()
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in PROMPTS
    ]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    digits = [i for token, i in tokenizer.get_vocab().items() if token.strip("Ġ").isdigit()]

    def digit_log_probability() -> float:
        """Continuous reward (log-probability mass on digit tokens per step), so members always differ."""
        with torch.no_grad():
            out = model.generate(
                **batch, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                output_scores=True, return_dict_in_generate=True,
            )
        steps = torch.stack(out.scores).log_softmax(dim=-1)[..., digits]
        return steps.logsumexp(dim=-1).mean().item()

    host = TorchWeightsHost(model, scope="all_linear")
    base_sha = host.weights_sha256()
    config = ESConfig(population_size=4, sigma=1e-3, alpha=5e-4, antithetic=True, total_steps=3)
    engine = ESEngine(config, host, ESHistory(tmp_path / "history.jsonl"))
    for _ in range(3):
        members = engine.ask()
        rewards = []
        for member in members:
            with host.perturbed(member):
                rewards.append(digit_log_probability())
        engine.tell(members, rewards)

    live_sha = host.weights_sha256()
    assert live_sha != base_sha
    records = ESHistory(tmp_path / "history.jsonl").load()
    assert len(records) == 3 and all(len(set(r.raw_rewards)) == 4 for r in records)
    base_model, _ = load_causal_lm()
    assert replay(base_model, ESHistory(tmp_path / "history.jsonl")).weights_sha256() == live_sha
