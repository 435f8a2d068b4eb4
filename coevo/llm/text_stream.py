"""One answer's text as it is decoded, in deltas a streaming client can show at once.

A token is not always a character: a byte-level tokenizer may split one UTF-8 character over several
tokens, and the text decoded so far then ends in U+FFFD until the rest arrives. A stop string may also
arrive a token at a time, and the answer is cut before it. So a delta holds only settled text: none of
a trailing partial character, none of a tail that could still grow into a stop string. The deltas of
an answer join to exactly its final text (`TextStream.finish` sends what was held back); a tokenizer
that cleans up tokenization spaces may rewrite earlier text when later tokens arrive, so its answers
are held whole until they finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from coevo.llm.base import TextListener
from coevo.llm.decode import find_stop

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_PARTIAL_CHARACTER = "\ufffd"


class TextStream:
    """Turns one answer's sampled tokens into text deltas for `listener`, as they arrive."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, stops: Sequence[str], listener: TextListener) -> None:
        self.tokenizer = tokenizer
        self.stops = [stop for stop in stops if stop]
        self.listener = listener
        self.incremental = not getattr(tokenizer, "clean_up_tokenization_spaces", False)
        self._tokens: list[int] = []
        self._sent = ""

    def add(self, token: int) -> None:
        """Take the next sampled token; send whatever text it settles."""
        self._tokens.append(token)
        if not self.incremental:
            return
        text = settled_text(self.tokenizer.decode(self._tokens, skip_special_tokens=True), self.stops)
        if len(text) > len(self._sent) and text.startswith(self._sent):
            self._send(text)

    def finish(self, final_text: str) -> None:
        """Send the rest of the answer, whose whole text (stop string cut off) is `final_text`."""
        if final_text.startswith(self._sent) and len(final_text) > len(self._sent):
            self._send(final_text)

    def _send(self, text: str) -> None:
        delta, self._sent = text[len(self._sent) :], text
        self.listener(delta)


def settled_text(text: str, stops: Sequence[str]) -> str:
    """The part of `text` no later token can change: cut at a stop string, without a trailing partial
    character or a tail that begins a stop string."""
    cut = find_stop(text, stops)
    if cut is not None:
        return text[:cut]
    text = text.rstrip(_PARTIAL_CHARACTER)
    held = max((_overlap(text, stop) for stop in stops), default=0)
    return text[: len(text) - held]


def _overlap(text: str, stop: str) -> int:
    """Length of the longest end of `text` that is a beginning of `stop` (shorter than `stop`)."""
    for length in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:length]):
            return length
    return 0
