"""Streamed text deltas from tokens as they are sampled: never half a character, never the start of a
stop string that is cut off later, and joined always the answer's final text."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from coevo.llm.decode import find_stop
from coevo.llm.text_stream import TextStream, settled_text


def byte_level_tokenizer(**options: object) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on ASCII only, so every non-ASCII character is several byte tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["the cat sat on the mat", "one two three stop"], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **options)


def stream_of(tokenizer: PreTrainedTokenizerFast, text: str, stops: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """(deltas, final text) of `text` fed a token at a time, ending as the decode loop ends a row: at the
    first token whose text holds a stop string."""
    deltas: list[str] = []
    stream = TextStream(tokenizer, stops, deltas.append)
    tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
    for end, token in enumerate(tokens, start=1):
        stream.add(token)
        decoded = tokenizer.decode(tokens[:end], skip_special_tokens=True)
        if find_stop(decoded, stops) is not None:
            break
    cut = find_stop(decoded, stops)
    final = decoded if cut is None else decoded[:cut]
    stream.finish(final)
    return deltas, final


def test_a_character_split_over_tokens_is_sent_whole() -> None:
    tokenizer = byte_level_tokenizer()
    text = "naïve café 🙂 the cat"
    tokens = tokenizer(text)["input_ids"]
    partial = [end for end in range(1, len(tokens)) if tokenizer.decode(tokens[:end]).endswith("\ufffd")]
    assert len(partial) >= 4  # ï, é and 🙂 are each several tokens (🙂 four)
    deltas, final = stream_of(tokenizer, text)
    assert final == text and "".join(deltas) == text
    assert not any("\ufffd" in delta for delta in deltas)
    assert len(deltas) > 5  # token by token, not the whole text at the end


@pytest.mark.parametrize(
    ("text", "stops", "answer"),
    [
        ("one two STOP three", ("STOP",), "one two "),
        ("one STAR two", ("STOP",), "one STAR two"),  # "ST" is held back, then sent once it is no stop
        ("the cat sat", ("at o", "t s"), "the ca"),  # the earliest stop wins
    ],
)
def test_a_stop_string_never_reaches_the_client(text: str, stops: tuple[str, ...], answer: str) -> None:
    deltas, final = stream_of(byte_level_tokenizer(), text, stops)
    assert final == answer and "".join(deltas) == answer


def test_settled_text_holds_back_partial_characters_and_stop_beginnings() -> None:
    assert settled_text("caf\ufffd", ()) == "caf"
    assert settled_text("one ST", ("STOP",)) == "one "
    assert settled_text("one STOP two", ("STOP",)) == "one "
    assert settled_text("one S", ("SS", "STOP")) == "one "


def test_a_tokenizer_that_rewrites_spaces_sends_its_answer_whole_at_the_end() -> None:
    """Space clean-up can change text already decoded once more tokens come ("a ." to "a.")."""
    deltas, final = stream_of(byte_level_tokenizer(clean_up_tokenization_spaces=True), "the cat sat")
    assert deltas == [final] == ["the cat sat"]
