"""A tiny random LlamaForCausalLM and a word-level tokenizer trained on the spot, for fast LM tests."""

from __future__ import annotations

from typing import Any

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "one two three four five six seven eight nine ten",
    "red green blue yellow black white",
    "write a short heuristic for the travelling salesman problem",
]
SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>"]


def build_tiny_tokenizer(corpus: list[str] = CORPUS) -> PreTrainedTokenizerFast:
    """Word-level tokenizer over `corpus`; left padding as batched decoding needs."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        padding_side="left",
    )


def build_tiny_llama(vocab_size: int, seed: int = 0, width: int = 64, **config_overrides: Any) -> LlamaForCausalLM:
    """Two-layer random Llama in fp32 eval mode: same module layout as SmolLM2, milliseconds per step.

    ``config_overrides`` replace LlamaConfig fields (e.g. ``eos_token_id=None`` for outputs that never stop).
    """
    torch.manual_seed(seed)
    config = LlamaConfig(
        **{
            "vocab_size": vocab_size,
            "hidden_size": width,
            "intermediate_size": 2 * width,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 256,
            "pad_token_id": 0,
            "bos_token_id": 2,
            "eos_token_id": 3,
            "tie_word_embeddings": True,
            **config_overrides,
        }
    )
    return LlamaForCausalLM(config).eval()


GRIDNAV_CORPUS = [*CORPUS, "move up", "move down", "move left", "move right", "row column goal"]


def build_tiny_agent(config: Any = None) -> Any:
    """A random tiny Llama behind the real `HFBackend`, whose words include gridnav's moves: a
    `module:factory` model (`tiny_lm:build_tiny_agent`) that plays episodes in milliseconds."""
    from coevo.llm.hf import HFBackend

    tokenizer = build_tiny_tokenizer(GRIDNAV_CORPUS)
    model = build_tiny_llama(len(tokenizer), max_position_embeddings=1024)
    return HFBackend(model, tokenizer, name="tiny-agent")


MOVES_CORPUS = ["move up", "move down", "move left", "move right"]


def build_terse_tiny_agent(config: Any = None) -> Any:
    """A random tiny Llama that knows only gridnav's moves and answers at most 4 tokens a turn: nearly every
    answer is a move, so its episodes are random walks that sometimes reach the goal (rewards vary, and
    ES updates really move the weights), at 16 times fewer decoding steps than `build_tiny_agent`."""
    from dataclasses import replace

    from coevo.llm.hf import HFBackend

    class TerseBackend(HFBackend):
        def generate_each(self, items):
            return super().generate_each([(m, replace(s, max_new_tokens=min(s.max_new_tokens, 4))) for m, s in items])

    tokenizer = build_tiny_tokenizer(MOVES_CORPUS)
    model = build_tiny_llama(len(tokenizer), max_position_embeddings=1024)
    return TerseBackend(model, tokenizer, name="tiny-terse-agent")
