"""The in-process backend: batching, per-request seeds, stops, token counts and weights identity."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tiny_lm import build_tiny_llama, build_tiny_tokenizer

from coevo.es.host import TorchWeightsHost
from coevo.es.perturbation import Perturbation, Update
from coevo.llm.base import LLM, Completion, SamplingParams
from coevo.llm.decode import most_likely_first
from coevo.llm.hf import HFBackend
from coevo.llm.seeds import request_seed

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}assistant :{% endif %}"
)
CAT = [{"role": "user", "content": "the cat sat on the mat"}]
COUNT = [{"role": "system", "content": "one two"}, {"role": "user", "content": "three four five six seven eight"}]
DOG = [{"role": "user", "content": "a dog"}]
SAMPLED = SamplingParams(max_new_tokens=12, temperature=1.0, top_p=0.95, seed=7)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama saved as a local model directory, with a chat template like real instruct models."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tiny_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    build_tiny_llama(tokenizer.vocab_size).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture
def backend(model_dir: Path) -> HFBackend:
    """fp32 whatever the CPU: a seeded request's text is the same in any batch only in fp32 (bf16's
    kernels sum in an order the batch's shape sets), and low-rank ES moves fp32 weights."""
    return HFBackend.load(str(model_dir), dtype="float32")


def _outcome(completion: Completion) -> tuple[str, int, str]:
    """What sampling decides (timing aside)."""
    return completion.text, completion.completion_tokens, completion.finish_reason


def test_loads_a_local_directory_and_satisfies_the_llm_protocol(backend: HFBackend, model_dir: Path) -> None:
    assert isinstance(backend, LLM)
    assert backend.name == model_dir.name
    assert backend.supports_weights


def test_batch_returns_one_completion_per_request_in_order(backend: HFBackend) -> None:
    requests = [CAT, COUNT, DOG]
    batch = backend.generate(requests, SAMPLED)

    assert len(batch) == 3
    for index, (conversation, completion) in enumerate(zip(requests, batch, strict=True)):
        alone = backend.generate_each([(conversation, replace(SAMPLED, seed=request_seed(SAMPLED.seed, index)))])[0]
        assert _outcome(completion) == _outcome(alone)
        prompt_ids = backend.tokenizer(backend.render(conversation), add_special_tokens=False)["input_ids"]
        assert completion.prompt_tokens == len(prompt_ids)
        assert 1 <= completion.completion_tokens <= SAMPLED.max_new_tokens
        assert completion.seconds > 0
        assert completion.weights_id == backend.weights_id


def test_a_batch_split_with_first_request_samples_as_the_whole_batch(backend: HFBackend) -> None:
    whole = backend.generate([CAT, COUNT, DOG], SAMPLED)
    head = backend.generate([CAT], SAMPLED)
    tail = backend.generate([COUNT, DOG], replace(SAMPLED, first_request=1))
    assert [_outcome(c) for c in head + tail] == [_outcome(c) for c in whole]
    assert _outcome(backend.generate([DOG], SAMPLED)[0]) != _outcome(whole[2]), "the offset moves the stream"


def test_a_seeded_request_gives_the_same_text_in_any_batch(backend: HFBackend) -> None:
    for seed in range(6):
        sampling = replace(SAMPLED, seed=seed)
        alone = backend.generate_each([(CAT, sampling)])[0]
        # Longer neighbours pad CAT on the left and run past its end: neither may change its tokens.
        mixed = backend.generate_each(
            [(COUNT, replace(sampling, max_new_tokens=20, seed=99)), (CAT, sampling), (DOG, sampling)]
        )
        assert _outcome(mixed[1]) == _outcome(alone)


def test_seeds_vary_the_text_and_unseeded_calls_are_fresh(backend: HFBackend) -> None:
    texts = {c.text for c in backend.generate([CAT] * 6, SAMPLED)}
    assert len(texts) > 1  # request i of a call has its own stream: repeats of a prompt differ
    assert [c.text for c in backend.generate([CAT] * 6, SAMPLED)] == [
        c.text for c in backend.generate([CAT] * 6, SAMPLED)
    ]
    unseeded = replace(SAMPLED, seed=None)
    assert len({backend.generate([CAT], unseeded)[0].text for _ in range(4)}) > 1


def test_temperature_zero_is_greedy_whatever_the_seed(backend: HFBackend) -> None:
    greedy = [backend.generate([COUNT], SamplingParams(max_new_tokens=8, temperature=0.0, seed=s))[0] for s in range(3)]
    assert len({_outcome(c) for c in greedy}) == 1


def test_stop_string_truncates_before_it_and_ends_the_row_early(backend: HFBackend) -> None:
    long = replace(SAMPLED, max_new_tokens=30)
    free, seed = next(
        (c, s) for s in range(50) if len((c := backend.generate([CAT], replace(long, seed=s))[0]).text.split()) >= 4
    )
    stop = " " + free.text.split()[2]
    stopped = backend.generate([CAT], replace(long, seed=seed, stop=("never-generated", stop)))[0]

    assert stopped.text == free.text[: free.text.find(stop)]
    assert stopped.finish_reason == "stop"
    assert stopped.completion_tokens < free.completion_tokens


def test_token_limit_and_end_token_set_finish_reason_and_counts(backend: HFBackend) -> None:
    greedy = SamplingParams(max_new_tokens=3, temperature=0.0)
    limited = backend.generate([CAT], greedy)[0]
    assert (limited.completion_tokens, limited.finish_reason) == (3, "length")

    # Declare the greedy first token an end-of-turn token: the row must end right there, counted once.
    encoded = backend.tokenizer(backend.render(CAT), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        first_token = int(backend.model(**encoded).logits[0, -1].argmax())
    backend.model.generation_config.eos_token_id = first_token
    ended = HFBackend(backend.model, backend.tokenizer, name="tiny-eos").generate([CAT], greedy)[0]
    assert (ended.completion_tokens, ended.finish_reason) == (1, "stop")


def test_weights_id_follows_the_live_weights_and_text_follows_them_too(backend: HFBackend) -> None:
    base_id = backend.weights_id
    base = backend.generate([CAT, COUNT], SAMPLED)
    host = TorchWeightsHost(backend.model)

    with host.perturbed(Perturbation(seed=3, sigma=0.5)):
        perturbed = backend.generate([CAT, COUNT], SAMPLED)
        assert perturbed[0].weights_id == backend.weights_id != base_id
    assert [_outcome(c) for c in perturbed] != [_outcome(c) for c in base]  # no stale cache of old weights

    restored = backend.generate([CAT, COUNT], SAMPLED)  # exact restore: same weights, same id, same text
    assert restored[0].weights_id == base_id
    assert [_outcome(c) for c in restored] == [_outcome(c) for c in base]

    host.apply_update(Update(seeds=(5,), coeffs=(1.0,), alpha=1e-3))
    assert backend.weights_id not in (base_id, perturbed[0].weights_id)


def test_host_drives_the_backend_model(backend: HFBackend) -> None:
    before = backend.weights_id
    with backend.host.perturbed(Perturbation(seed=1, sigma=1e-3)):
        assert backend.weights_id != before
    assert backend.weights_id == before


def test_a_bf16_backend_computes_in_bf16_and_its_host_moves_the_fp32_weights(model_dir: Path) -> None:
    fp32, bf16 = HFBackend.load(str(model_dir), dtype="float32"), HFBackend.load(str(model_dir), dtype="bfloat16")
    assert (fp32.compute_dtype, bf16.compute_dtype) == ("float32", "bfloat16")
    assert all(p.dtype == torch.bfloat16 for p in bf16.model.parameters())
    update = Update(seeds=(3,), coeffs=(1.0,), alpha=1e-3)
    fp32.host.apply_update(update)
    bf16.host.apply_update(update)
    for p32, p16 in zip(fp32.model.parameters(), bf16.model.parameters(), strict=True):
        assert torch.equal(p16, p32.to(torch.bfloat16))
    batch = [_outcome(c) for c in bf16.generate([CAT, COUNT, DOG], SAMPLED)]
    assert all(tokens >= 1 for _, tokens, _ in batch)
    again = [_outcome(c) for c in bf16.generate([CAT, COUNT, DOG], SAMPLED)]
    assert again == batch, "the same batch gives the same texts in bf16 too, which exact resume relies on"


def test_base_model_without_chat_template_gets_a_plain_transcript() -> None:
    tokenizer = build_tiny_tokenizer()
    backend = HFBackend(build_tiny_llama(tokenizer.vocab_size), tokenizer, name="tiny-base")
    assert backend.render(COUNT) == "system: one two\nuser: three four five six seven eight\nassistant:"
    assert backend.generate([COUNT], SamplingParams(max_new_tokens=4, seed=0))[0].completion_tokens >= 1


def test_large_calls_are_split_into_batches_without_changing_results(backend: HFBackend) -> None:
    whole = backend.generate([CAT, COUNT, DOG, CAT, COUNT], SAMPLED)
    backend.max_batch_size = 2
    assert [_outcome(c) for c in backend.generate([CAT, COUNT, DOG, CAT, COUNT], SAMPLED)] == [
        _outcome(c) for c in whole
    ]


def test_smollm2_answers_in_a_batch_with_token_counts() -> None:
    """The real embedded model (~3 s cached load, ~5 s of generation)."""
    backend = HFBackend.load()
    questions = [
        [{"role": "user", "content": "What is 2+2? Answer with one number."}],
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
    ]
    answers = backend.generate(questions, SamplingParams(max_new_tokens=10, temperature=0.0, stop=("\n",)))
    assert "4" in answers[0].text
    assert "Paris" in answers[1].text
    assert all(a.prompt_tokens > 10 and 1 <= a.completion_tokens <= 10 for a in answers)
    seeded = SamplingParams(max_new_tokens=10, temperature=0.8, seed=11)
    assert [a.text for a in backend.generate(questions, seeded)] == [
        a.text for a in backend.generate(questions, seeded)
    ]


def test_nucleus_shortcut_equals_a_full_sort_or_falls_back_to_one() -> None:
    generator = torch.Generator().manual_seed(0)
    peaked = torch.softmax(8 * torch.randn(4, 5000, generator=generator), dim=-1)
    flat = torch.softmax(0.01 * torch.randn(4, 5000, generator=generator), dim=-1)
    top_p = torch.full((4, 1), 0.9)
    for probs in (peaked, flat):
        values, ids = most_likely_first(probs, top_p)
        full_values, full_ids = probs.sort(dim=-1, descending=True)
        kept = values.shape[-1]
        assert torch.equal(values, full_values[:, :kept]) and torch.equal(ids, full_ids[:, :kept])
        assert bool((values.sum(dim=-1) >= 0.9).all())  # every row's nucleus is inside what was kept
    assert most_likely_first(peaked, top_p)[0].shape[-1] < 5000 == most_likely_first(flat, top_p)[0].shape[-1]


def test_lowrank_members_carry_the_id_of_their_own_weights(backend: HFBackend) -> None:
    from coevo.es.lowrank import LowRankHost

    host = LowRankHost(backend.model, rank=1)
    members = [Perturbation(seed=3, sigma=0.5), Perturbation(seed=4, sigma=0.5, sign=-1)]
    base_id = backend.weights_id
    with host.population(members, [0, 1]):
        rows = backend.generate([CAT, CAT], SAMPLED)
    ids = [c.weights_id for c in rows]
    assert base_id not in ids and len(set(ids)) == 2, "each row names the member that wrote it"
    with host.population(members, [1, 0]):
        swapped = backend.generate([DOG, DOG], SAMPLED)
    assert [c.weights_id for c in swapped] == ids[::-1], "a member's id is its own, whatever its row"
    assert backend.generate([CAT], SAMPLED)[0].weights_id == base_id  # so `at_weights(base)` refuses member text
