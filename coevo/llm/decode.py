"""Decoding a batch of prompts on an in-process model: the per-request sampler, where rows end, and the
lean decode loop `decode` (the default of `HFBackend`).

Why its own sampler: transformers' sampling draws every row from one global RNG, so a request's text
would depend on which other requests share its batch. Here each row draws from its own generator
(seeded by `SamplingParams.seed_for`); under transformers' `generate` the sampler hands it a one-hot
score per row, and the lean loop asks it for the token directly.

Why a loop of its own: on CPU a small model's turn is dominated by what surrounds the matmuls. The
lean loop computes the logits of the last position only, drops a row from the batch (and its KV
cache) as soon as it ends, and reuses the keys and values of the prompt prefix all rows share (an
agent's rules and instructions) within a call and, under the same weights, across calls. Sampling
draws from the same per-row streams, so a row's tokens are those `generate` gives, up to float
rounding of differently shaped matmuls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, LogitsProcessor, PreTrainedModel, PreTrainedTokenizerBase, StoppingCriteria

from coevo.llm.base import SamplingParams

_NUCLEUS_CANDIDATES = 256
_MIN_SHARED_PREFIX = 8
"""Shorter shared prefixes are recomputed with their rows: a separate pass would cost more than it saves."""


class PerRequestSampler(LogitsProcessor):
    """Temperature + nucleus sampling with one generator per row; temperature 0 means greedy."""

    def __init__(self, settings: Sequence[SamplingParams]) -> None:
        self.temperature = torch.tensor([s.temperature for s in settings], dtype=torch.float32)[:, None]
        self.top_p = torch.tensor([s.top_p for s in settings], dtype=torch.float32)[:, None]
        self.generators = [row_generator(s.seed) for s in settings]

    def choose(self, scores: torch.Tensor, rows: Sequence[int] | None = None) -> torch.Tensor:
        """The next token of each row (`rows`: which of the settings' rows `scores` holds; default all)."""
        if rows is None:
            temperature, top_p, generators = self.temperature, self.top_p, self.generators
        else:
            index = torch.as_tensor(rows, dtype=torch.long)
            temperature, top_p = self.temperature[index], self.top_p[index]
            generators = [self.generators[row] for row in rows]
        logits = scores.detach().float().cpu()  # CPU generators draw the same numbers whatever the device
        if not bool((temperature > 0).any()):
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / temperature.clamp_min(1e-6), dim=-1)
        sorted_probs, order = most_likely_first(probs, top_p)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        nucleus = sorted_probs.masked_fill(mass_before >= top_p, 0.0).cumsum(dim=-1)
        # One uniform per row per step, whatever the batch: the row's stream never depends on its mates.
        uniforms = torch.stack([torch.rand((), generator=g) for g in generators])[:, None]
        picks = torch.searchsorted(nucleus, uniforms * nucleus[:, -1:], right=True).clamp_max(logits.shape[-1] - 1)
        sampled = order.gather(-1, picks).squeeze(-1)
        return torch.where(temperature.squeeze(-1) > 0, sampled, logits.argmax(dim=-1))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        chosen = self.choose(scores)
        one_hot = torch.full_like(scores, float("-inf"))
        one_hot[torch.arange(scores.shape[0], device=scores.device), chosen.to(scores.device)] = 0.0
        return one_hot


def most_likely_first(probs: torch.Tensor, top_p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Probabilities sorted descending, with their token ids, far enough to hold every row's nucleus.

    A full sort of a 50k vocabulary costs more than the rest of sampling; the nucleus almost always
    lies in the top few hundred tokens, and when it does the result equals the full sort's.
    """
    top = torch.topk(probs, min(_NUCLEUS_CANDIDATES, probs.shape[-1]), dim=-1)
    if bool((top.values.sum(dim=-1, keepdim=True) >= top_p).all()):
        return top.values, top.indices
    return probs.sort(dim=-1, descending=True)


def row_generator(seed: int | None) -> torch.Generator:
    generator = torch.Generator()
    if seed is None:
        generator.seed()  # fresh entropy: an unseeded request is not meant to be reproducible
    else:
        generator.manual_seed(seed)
    return generator


class RowEnds(StoppingCriteria):
    """Ends each row at its own EOS, stop string or token limit, and records where and why it ended."""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, prompt_length: int, settings: Sequence[SamplingParams], eos: set[int]
    ) -> None:
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.settings = settings
        self.eos = eos
        self.lengths: list[int | None] = [None] * len(settings)
        self.reasons = ["length"] * len(settings)

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor | None, **kwargs: object
    ) -> torch.BoolTensor:
        generated = input_ids[:, self.prompt_length :]
        for row, sampling in enumerate(self.settings):
            if self.lengths[row] is None:
                reason = end_reason(self.tokenizer, generated[row].tolist(), sampling, self.eos)
                if reason is not None:
                    self.lengths[row], self.reasons[row] = generated.shape[1], reason
        return torch.tensor([length is not None for length in self.lengths])


def end_reason(
    tokenizer: PreTrainedTokenizerBase, generated: Sequence[int], sampling: SamplingParams, eos: set[int]
) -> str | None:
    """Why a row whose sampled tokens so far are `generated` ends now ("stop", "length"), or None."""
    if generated[-1] in eos or (
        sampling.stop and find_stop(tokenizer.decode(generated, skip_special_tokens=True), sampling.stop) is not None
    ):
        return "stop"
    return "length" if len(generated) >= sampling.max_new_tokens else None


def find_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index of the earliest stop string in text, or None."""
    hits = [index for index in (text.find(stop) for stop in stops if stop) if index >= 0]
    return min(hits) if hits else None


@dataclass(frozen=True)
class _Prefix:
    weights: str
    """Which weights computed the keys and values (a prefix is only reused under the same weights)."""
    tokens: tuple[int, ...]
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    """Per layer (keys, values), each of shape (1, heads, len(tokens), head dim)."""

    def cut(self, length: int) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        return tuple((k[:, :, :length], v[:, :, :length]) for k, v in self.layers)


class PrefixCache:
    """The keys and values of the last prompt prefix a batch shared, for later calls under the same weights.

    An agent's prompts start with the same rules every turn and differ after the turn counter: a new
    batch reuses the longest part of the stored prefix it shares and computes the rest once.
    """

    def __init__(self) -> None:
        self._entry: _Prefix | None = None

    def keys_values(
        self, model: PreTrainedModel, weights: str, shared: Sequence[int]
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        """Per layer (keys, values) of the tokens `shared`, computed under `weights` (reused where stored)."""
        entry = self._entry
        reused = 0
        if entry is not None and entry.weights == weights:
            reused = _common_length([entry.tokens, shared])
        if reused < _MIN_SHARED_PREFIX:
            layers = _forward_prefix(model, shared, ())
            self._entry = _Prefix(weights, tuple(shared), layers)
            return layers
        if reused == len(shared):
            return entry.cut(reused)
        return _forward_prefix(model, shared[reused:], entry.cut(reused))

    def clear(self) -> None:
        self._entry = None


def _forward_prefix(
    model: PreTrainedModel, tokens: Sequence[int], past: tuple[tuple[torch.Tensor, torch.Tensor], ...]
) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """(keys, values) per layer of `past` followed by `tokens`, one row."""
    cache = DynamicCache(ddp_cache_data=past) if past else DynamicCache()
    start = past[0][0].shape[2] if past else 0
    ids = torch.tensor([list(tokens)], device=model.device)
    positions = torch.arange(start, start + len(tokens), device=model.device)[None]
    model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1)
    return tuple((layer.keys, layer.values) for layer in cache.layers)


def _common_length(sequences: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix all sequences share."""
    shortest = min(len(s) for s in sequences)
    for index in range(shortest):
        token = sequences[0][index]
        if any(s[index] != token for s in sequences):
            return index
    return shortest


def decode_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[int]],
    settings: Sequence[SamplingParams],
    eos: set[int],
    prefixes: PrefixCache | None,
    weights: str,
    rows_fixed: bool = False,
    on_token: Callable[[int, int], None] | None = None,
) -> list[tuple[list[int], str]]:
    """(sampled tokens, end reason) of each prompt, decoded together.

    `prefixes` (None: no reuse) holds the shared prefix's keys and values under `weights`. `rows_fixed`
    keeps every row in the batch to the end, for forward hooks that tell rows apart by position
    (a low-rank population); a prefix is then never shared either, since one row would compute it.
    `on_token(prompt index, token)` sees each token as soon as it is sampled, so a server can stream it.
    """
    sampler = PerRequestSampler(settings)
    count = len(prompts)
    shared = 0
    past: tuple[tuple[torch.Tensor, torch.Tensor], ...] = ()
    if prefixes is not None and not rows_fixed:
        shared = min(_common_length(prompts), min(len(p) for p in prompts) - 1)
        if shared >= _MIN_SHARED_PREFIX:
            past = tuple(
                (k.expand(count, -1, -1, -1), v.expand(count, -1, -1, -1))
                for k, v in prefixes.keys_values(model, weights, prompts[0][:shared])
            )
        else:
            shared = 0
    device = model.device
    suffixes = [list(p[shared:]) for p in prompts]
    width = max(len(s) for s in suffixes)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in suffixes], device=device)
    suffix_mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in suffixes], device=device)
    attention = torch.cat([torch.ones(count, shared, dtype=torch.long, device=device), suffix_mask], dim=1)
    positions = (shared + suffix_mask.cumsum(dim=1) - 1).masked_fill(suffix_mask == 0, shared)
    cache = DynamicCache(ddp_cache_data=past) if past else DynamicCache()
    with torch.no_grad():
        logits = model(
            input_ids=ids,
            attention_mask=attention,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        position = positions[:, -1]
        in_batch = list(range(count))  # batch position -> prompt index
        generated: list[list[int]] = [[] for _ in prompts]
        reasons: list[str | None] = [None] * count
        while True:
            live = [slot for slot, row in enumerate(in_batch) if reasons[row] is None]
            chosen = sampler.choose(logits[live], [in_batch[slot] for slot in live])
            for slot, token in zip(live, chosen.tolist(), strict=True):
                row = in_batch[slot]
                generated[row].append(token)
                reasons[row] = end_reason(tokenizer, generated[row], settings[row], eos)
                if on_token is not None:
                    on_token(row, token)
            still = [slot for slot in live if reasons[in_batch[slot]] is None]
            if not still:
                break
            step = torch.full((len(in_batch),), pad, dtype=torch.long)
            step[live] = chosen
            if not rows_fixed and len(still) < len(in_batch):
                keep = torch.tensor(still, dtype=torch.long, device=device)
                cache.batch_select_indices(keep)
                attention, position, step = attention[keep], position[keep], step[keep]
                in_batch = [in_batch[slot] for slot in still]
            attention = torch.cat([attention, attention.new_ones(len(in_batch), 1)], dim=1)
            position = position + 1
            logits = model(
                input_ids=step[:, None].to(device),
                attention_mask=attention,
                position_ids=position[:, None],
                cache=cache,
                use_cache=True,
            ).logits[:, -1]
    return [(tokens, reason) for tokens, reason in zip(generated, reasons, strict=True)]
