"""The DSPy adapter: DSPy programs run on coevo backends, and no cached answer outlives its weights."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

import pytest

dspy = pytest.importorskip("dspy", reason="the dspy extra is not installed")
from dspy import lm15  # noqa: E402
from dspy.utils.exceptions import LMUnexpectedError  # noqa: E402
from tiny_lm import build_tiny_llama, build_tiny_tokenizer  # noqa: E402

from coevo.es.perturbation import Perturbation  # noqa: E402
from coevo.llm.base import Completion, Message, SamplingParams  # noqa: E402
from coevo.llm.dspy_lm import CoevoLM, WeightsMismatchError, to_sampling  # noqa: E402
from coevo.llm.hf import HFBackend  # noqa: E402


class ScriptedLLM:
    """A coevo backend that answers in DSPy's chat-adapter format and names its current weights."""

    name = "scripted"

    def __init__(self) -> None:
        self.weights_id = f"w-{uuid.uuid4().hex}"  # unique per test: DSPy's cache is process-wide
        self.conversations: list[Sequence[Message]] = []
        self.samplings: list[SamplingParams] = []

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        self.conversations.extend(requests)
        self.samplings.append(sampling)
        text = f"[[ ## answer ## ]]\nanswer from {self.weights_id}\n\n[[ ## completed ## ]]"
        return [Completion(text, 11, 7, 0.01, "stop", self.weights_id) for _ in requests]


@pytest.fixture(autouse=True)
def memory_only_cache() -> Iterator[None]:
    """Keep tests out of the user's DSPy disk cache while still exercising DSPy's real cache."""
    saved = dspy.cache
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    yield
    dspy.cache = saved


def _ask(lm: dspy.LM, question: str = "What is 2 + 2?") -> str:
    with dspy.context(lm=lm):
        return dspy.Predict("question -> answer")(question=question).answer


def test_predict_runs_end_to_end_through_the_backend() -> None:
    backend = ScriptedLLM()
    lm = CoevoLM(backend, temperature=0.3, max_tokens=64)

    answer = _ask(lm, "What is 2 + 2?")

    assert answer == f"answer from {backend.weights_id}"
    (conversation,) = backend.conversations
    assert [m["role"] for m in conversation] == ["system", "user"]
    assert "What is 2 + 2?" in conversation[-1]["content"]
    assert (backend.samplings[0].temperature, backend.samplings[0].max_new_tokens) == (0.3, 64)
    assert lm.history[-1]["usage"]["prompt_tokens"] == 11


def test_unpinned_lm_never_serves_a_cached_answer() -> None:
    backend = ScriptedLLM()
    lm = CoevoLM(backend)

    first = _ask(lm)
    backend.weights_id = "perturbed"
    second = _ask(lm)

    assert first != second == "answer from perturbed"
    assert len(backend.conversations) == 2


def test_pinned_lm_caches_per_weights_version() -> None:
    backend = ScriptedLLM()
    base = CoevoLM(backend)
    before = backend.weights_id

    assert _ask(base.at_weights(before)) == _ask(base.at_weights(before)) == f"answer from {before}"
    assert len(backend.conversations) == 1  # the second call was a cache hit

    backend.weights_id = f"{before}+seed7"
    assert _ask(base.at_weights(backend.weights_id)) == f"answer from {before}+seed7"
    assert len(backend.conversations) == 2  # new weights, new cache key: no stale answer


def test_pinned_lm_refuses_answers_from_other_weights() -> None:
    backend = ScriptedLLM()
    pinned = CoevoLM(backend).at_weights(backend.weights_id)
    backend.weights_id = "changed-behind-its-back"

    with pytest.raises(LMUnexpectedError, match="pinned to") as info:  # DSPy wraps engine errors
        pinned("a prompt it has never seen")
    assert isinstance(info.value.__cause__, WeightsMismatchError)


def test_at_weights_keeps_the_sampling_settings() -> None:
    lm = CoevoLM(ScriptedLLM(), temperature=0.2, max_tokens=32).at_weights("w")

    assert (lm.kwargs["temperature"], lm.kwargs["max_tokens"], lm.cache) == (0.2, 32, True)


class RawTextAdapter(dspy.ChatAdapter):
    """Takes the whole completion as the one output field: a random tiny model writes no field markers."""

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, str]:
        (field,) = signature.output_fields
        return {field: completion}


def test_dspy_program_runs_on_a_perturbed_in_process_model() -> None:
    tokenizer = build_tiny_tokenizer()
    backend = HFBackend(build_tiny_llama(tokenizer.vocab_size), tokenizer, name="tiny")
    program = dspy.Predict("question -> answer")
    ask = lambda: program(question="the cat sat on the mat").answer  # noqa: E731

    with dspy.context(lm=CoevoLM(backend, temperature=1.0, max_tokens=6, seed=123), adapter=RawTextAdapter()):
        base_id, base = backend.weights_id, ask()
        with backend.host.perturbed(Perturbation(seed=7, sigma=0.5)):
            perturbed_id, perturbed = backend.weights_id, ask()
        restored = ask()

    assert base.strip() and base == restored != perturbed
    assert perturbed_id != base_id == backend.weights_id


def test_unset_dspy_config_keeps_coevo_defaults_and_unsupported_features_are_refused() -> None:
    assert to_sampling(lm15.Config()) == SamplingParams()
    assert to_sampling(lm15.Config(seed=5, stop=("\n",))) == SamplingParams(seed=5, stop=("\n",))
    with pytest.raises(lm15.UnsupportedFeatureError, match="response_format"):
        to_sampling(lm15.Config(response_format={"type": "json_object"}))
