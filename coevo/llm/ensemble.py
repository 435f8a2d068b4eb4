"""An ensemble as one `LLM`: each call's requests are shared among named models by the bandit
(`coevo.llm.bandit`), and every completion is tagged with the model that wrote it.

The router keeps no state of its own: it asks `pulls()` for the evidence each time, so whoever owns
the evidence (a run's store) decides what a resumed run remembers. A model answers a contiguous block
of the call's requests, and each request keeps its own sampling stream (`SamplingParams.first_request`),
so a request's seed does not depend on which model answers the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from coevo.llm.bandit import Pull, shares
from coevo.llm.base import LLM, Completion, Message, SamplingParams


class EnsembleLLM:
    """Named models behind one `generate`, chosen per request by an asymmetric UCB bandit."""

    name = "ensemble"

    def __init__(self, models: Mapping[str, LLM], pulls: Callable[[], Sequence[Pull]], exploration: float) -> None:
        """`models` in their order of precedence (ties go to the first); `pulls()` returns the children
        the models wrote so far, the bandit's evidence."""
        self.models = dict(models)
        self.pulls = pulls
        self.exploration = exploration

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        allotted = shares(list(self.models), self.pulls(), len(requests), self.exploration)
        completions: list[Completion] = []
        for name, count in allotted.items():
            if not count:
                continue
            start = len(completions)
            block = replace(sampling, first_request=sampling.first_request + start)
            answers = self.models[name].generate(requests[start : start + count], block)
            if len(answers) != count:
                raise RuntimeError(f"model {name!r} returned {len(answers)} completions for {count} requests")
            completions += [replace(answer, model=name) for answer in answers]
        return completions
