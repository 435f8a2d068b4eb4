"""Novelty before evaluation: a child whose code lies too close to a population member's is shown to an
LLM judge next to that member, so a near-copy can be turned away before it costs an evaluation.

As in ShinkaEvolve: each code is embedded, the child's nearest member by cosine is found, and only at or
above the threshold is the judge asked (below it the child is novel and no call is made). The judge
must answer with exactly one line `novel: yes` or `novel: no`; any other answer is unreadable, and an
unreadable answer leaves the similarity to decide: not novel. Vectors are kept per candidate key, so a
member is embedded once however many checks it takes part in. The resampling of refused children and
the records are the run's (`coevo.run.novelty_gate`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from coevo.llm.base import LLM, Message, SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.operators.metering import metered_generate
from coevo.operators.records import Rejection, TextProposal

if TYPE_CHECKING:
    from coevo.llm.embedding import Embedder

JUDGE = "novelty judge"
"""The operator name of the judge's calls, in the ledger and the run store."""

JUDGE_TOKENS = 64
"""The judge's answer length: one verdict line, with room for a sentence before it."""

JUDGE_PROMPT = """Program A is already in a population of heuristics; program B is a new candidate.

Program A:
```python
{neighbour}
```

Program B:
```python
{child}
```

Is program B really new: does it compute something different from program A, not just the same logic \
with other names, comments, formatting or a slightly different constant? Answer with exactly one line, \
either

novel: yes

or

novel: no"""

Verdict = Literal["yes", "no", "unreadable"]

_VERDICT_LINE = re.compile(r"^\s*novel:\s*(yes|no)\s*$", re.IGNORECASE)


def read_verdict(answer: str) -> Verdict:
    """The judge's verdict: the one line `novel: yes` or `novel: no` of its answer (any case, spaces
    around); no such line, or more than one, is unreadable."""
    verdicts = [match.group(1).lower() for line in answer.splitlines() if (match := _VERDICT_LINE.match(line))]
    return verdicts[0] if len(verdicts) == 1 else "unreadable"


def judge_prompt(child: str, neighbour: str) -> list[Message]:
    return [{"role": "user", "content": JUDGE_PROMPT.format(child=child.strip(), neighbour=neighbour.strip())}]


def nearest(vector: np.ndarray, members: Mapping[str, np.ndarray]) -> tuple[str, float] | None:
    """The key of the member whose vector has the highest cosine with `vector` (the first of a tie, in
    the mapping's order), and that cosine; None without members."""
    if not members:
        return None
    keys = list(members)
    matrix = np.stack([members[key] for key in keys]).astype(np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(vector)
    cosines = matrix @ vector.astype(np.float64) / np.maximum(norms, np.finfo(np.float64).tiny)
    best = int(np.argmax(cosines))
    return keys[best], float(cosines[best])


@dataclass(frozen=True)
class Judgement:
    """A child at or above the threshold, and what the judge made of it."""

    key: str
    neighbour: str
    """The key of the member nearest to it."""
    similarity: float
    verdict: Verdict
    call: TextProposal
    """The judge's call, for the store."""

    @property
    def novel(self) -> bool:
        return self.verdict == "yes"

    def reason(self, tries: int) -> str:
        """Why the child is rejected, after `tries` tries."""
        return (
            f"not novel after {tries} {'try' if tries == 1 else 'tries'}: cosine {self.similarity:.4f} to "
            f"{self.neighbour}, judge: {self.verdict}"
        )


@dataclass(frozen=True)
class NotNovel(Rejection):
    """A child still judged not novel on its last try: recorded like any rejection, never evaluated and
    not charged to the budget."""


class NoveltyCheck:
    """Embeds codes (once per key) and asks the judge about the children at or above `threshold`."""

    def __init__(
        self, embedder: Embedder, judge: LLM, threshold: float, vectors: Mapping[str, np.ndarray] | None = None
    ) -> None:
        """`vectors`: those computed before (a resumed run's), which are never recomputed."""
        self.embedder = embedder
        self.judge = judge
        self.threshold = threshold
        self.vectors: dict[str, np.ndarray] = dict(vectors or {})

    def embed(self, codes: Mapping[str, str]) -> dict[str, np.ndarray]:
        """Keep a vector for each code (key -> code), embedding only those not kept yet; returns the new ones."""
        missing = [key for key in codes if key not in self.vectors]
        if not missing:
            return {}
        fresh = dict(zip(missing, self.embedder.embed([codes[key] for key in missing]), strict=True))
        self.vectors |= fresh
        return fresh

    def judgements(
        self,
        children: Sequence[tuple[str, str]],
        members: Mapping[str, str],
        sampling: SamplingParams,
        ledger: BudgetLedger,
    ) -> list[Judgement | None]:
        """Per child (key, code), already embedded as the members (key -> code) are: None when it is below
        the threshold, else the judge's verdict on it and its nearest member, all asked in one call
        (greedy, `JUDGE_TOKENS` long, charged to `ledger`)."""
        kept = {key: self.vectors[key] for key in members}
        closest = [nearest(self.vectors[key], kept) for key, _ in children]
        close = [i for i, found in enumerate(closest) if found is not None and found[1] >= self.threshold]
        if not close:
            return [None] * len(children)
        prompts = [judge_prompt(children[i][1], members[closest[i][0]]) for i in close]
        asking = replace(sampling, temperature=0.0, max_new_tokens=JUDGE_TOKENS, first_request=0, requests_per_stream=1)
        answers = metered_generate(self.judge, prompts, asking, ledger, JUDGE)
        judged: list[Judgement | None] = [None] * len(children)
        for index, prompt, completion in zip(close, prompts, answers, strict=True):
            neighbour, similarity = closest[index]
            call = TextProposal(completion.text, JUDGE, prompt, completion, (neighbour,))
            judged[index] = Judgement(children[index][0], neighbour, similarity, read_verdict(completion.text), call)
        return judged
