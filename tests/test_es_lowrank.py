"""Low-rank batched ES: one batch of N members equals N dense perturbed models, and it learns."""

from __future__ import annotations

import pytest
import torch
from tiny_lm import build_tiny_llama, build_tiny_tokenizer

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.lowrank import LowRankHost, lowrank_direction
from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Perturbation, Update
from coevo.es.update_log import ESHistory, replay

RANK = 2


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture
def model(tokenizer):
    return build_tiny_llama(tokenizer.vocab_size)


def _members(n: int, sigma: float = 0.05) -> list[Perturbation]:
    return [Perturbation(seed=100 + i, sigma=sigma, sign=1 if i % 2 == 0 else -1) for i in range(n)]


@torch.no_grad()
def _dense_logits(model, host: LowRankHost, member: Perturbation, ids: torch.Tensor) -> torch.Tensor:
    """Forward of the model with W + sign sigma E materialised by hand (independent of the host)."""
    weights = dict(model.named_parameters())
    saved = {name: weights[name].detach().clone() for name in host.parameter_names}
    for name in host.parameter_names:
        direction = lowrank_direction(member.seed, name, tuple(weights[name].shape), RANK)
        weights[name].add_(member.sign * member.sigma * direction)
    logits = model(ids).logits
    for name in host.parameter_names:
        weights[name].copy_(saved[name])
    return logits


def test_batched_rows_equal_the_materialised_members(model, tokenizer) -> None:
    host = LowRankHost(model, rank=RANK)
    members = _members(3)
    ids = torch.randint(4, tokenizer.vocab_size, (6, 9), generator=torch.Generator().manual_seed(0))
    member_of_row = [2, 0, 1, 1, 0, 2]
    with torch.no_grad(), host.population(members, member_of_row):
        batched = model(ids).logits
    plain = model(ids).logits
    for row, member in enumerate(member_of_row):
        dense = _dense_logits(model, host, members[member], ids[row : row + 1])[0]
        torch.testing.assert_close(batched[row], dense, rtol=1e-5, atol=2e-5)
        assert (batched[row] - plain[row]).abs().max() > 1e-3  # the perturbation is visible


def test_generate_keeps_the_row_to_member_map(model, tokenizer) -> None:
    host = LowRankHost(model, rank=RANK)
    members = _members(2, sigma=0.3)
    prompts = tokenizer(["the cat sat", "one two three four", "red"], return_tensors="pt", padding=True)
    settings = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False}
    settings |= {"num_beams": 2, "num_return_sequences": 2}
    with torch.no_grad(), host.population(members, [0, 1, 0]):
        batched = model.generate(**prompts, **settings)
    for row in range(3):  # beam search expands prompt `row` into rows 2 row and 2 row + 1
        member = members[[0, 1, 0][row]]
        one = {k: v[row : row + 1] for k, v in prompts.items()}
        with torch.no_grad(), host.perturbed(member):
            alone = model.generate(**one, **settings)
        assert torch.equal(batched[2 * row : 2 * row + 2], alone)


def test_perturb_restore_is_exact_and_bad_input_is_refused(model) -> None:
    host = LowRankHost(model, rank=RANK)
    before = host.weights_sha256()
    for member in _members(5):
        with host.perturbed(member):
            assert host.weights_sha256() != before
    assert host.weights_sha256() == before
    with pytest.raises(ValueError, match="member indices"), host.population(_members(2), [0, 2]):
        pass
    with pytest.raises(ValueError, match="only nn.Linear weights"):
        LowRankHost(model, scope="full")
    with pytest.raises(ValueError, match="reference rule"):
        host.apply_update(Update((1,), (1.0,), 0.1, optimizer=OptimizerConfig(kind="adam")))


def test_update_is_the_full_rank_sum_of_member_directions(model) -> None:
    host = LowRankHost(model, rank=RANK)
    name = host.parameter_names[0]
    weight = dict(model.named_parameters())[name]
    before = weight.detach().clone()
    update = Update(seeds=(7, 8, 9), coeffs=(0.5, -1.0, 0.25), alpha=0.01)
    host.apply_update(update)
    expected = before + 0.01 * sum(
        c * lowrank_direction(s, name, tuple(before.shape), RANK) for s, c in zip(update.seeds, update.coeffs)
    )
    torch.testing.assert_close(weight.detach(), expected, rtol=0, atol=1e-6)
    assert torch.linalg.matrix_rank(weight.detach() - before) == 3 * RANK


def _target_frequency(generated: torch.Tensor, target: int) -> torch.Tensor:
    return (generated == target).float().mean(dim=1)


def test_lowrank_es_raises_the_frequency_of_a_target_token(model, tokenizer, tmp_path) -> None:
    """Reward = share of generated tokens equal to "cat"; 16 members x 4 prompts decode as one batch."""
    target = tokenizer.convert_tokens_to_ids("cat")
    prompts = tokenizer(["a dog ran", "one two", "red green blue", "write a short"], return_tensors="pt", padding=True)
    n_members, n_prompts, new_tokens = 16, prompts["input_ids"].shape[0], 8
    batch = {k: v.repeat(n_members, 1) for k, v in prompts.items()}  # row k: member k // n_prompts
    member_of_row = torch.arange(n_members).repeat_interleave(n_prompts)
    settings = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False}

    def reward_of_base() -> float:
        with torch.no_grad():
            out = model.generate(**prompts, **settings)
        return _target_frequency(out[:, prompts["input_ids"].shape[1] :], target).mean().item()

    host = LowRankHost(model, rank=4)
    base_sha, base_state = host.weights_sha256(), {k: v.clone() for k, v in model.state_dict().items()}
    config = ESConfig(population_size=n_members, sigma=0.05, alpha=0.1, antithetic=True, seed=3)
    engine = ESEngine(config, host, ESHistory(tmp_path / "history.jsonl"))
    start = reward_of_base()
    for _ in range(8):
        members = engine.ask()
        with torch.no_grad(), host.population(members, member_of_row):
            out = model.generate(**batch, **settings)
        per_row = _target_frequency(out[:, batch["input_ids"].shape[1] :], target)
        engine.tell(members, per_row.view(n_members, n_prompts).mean(dim=1).tolist())
    assert start == 0.0 and reward_of_base() >= 0.5

    live_sha = host.weights_sha256()
    model.load_state_dict(base_state)
    assert host.weights_sha256() == base_sha != live_sha
    replayed = replay(LowRankHost(model, rank=4), ESHistory(tmp_path / "history.jsonl"))
    assert replayed.weights_sha256() == live_sha
