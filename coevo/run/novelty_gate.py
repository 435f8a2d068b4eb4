"""The novelty check in a proposal call (`[novelty]`, docs/runs.md#novelty-before-evaluation): the
children of a call are checked against the population before any is evaluated; those the judge does not
call novel are asked again, up to `novelty.tries` children per request, and a request whose last child
is still not novel ends in a `NotNovel` rejection, which is recorded and never evaluated.

Everything is written to the run store inside the call's step: every new embedding (so a resumed run
reuses the vectors, computed under the weights of their time, rather than recomputing them), every
judge call, every judged child with its outcome, and the LLM call of each refused child that was asked
again. Only the members of the population take part as neighbours, never a child's siblings, so the
two children of a mirrored ES pair are judged alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from coevo.candidate import Candidate, WeightsRef, code_key
from coevo.llm.base import LLM, SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.novelty import Judgement, NotNovel, NoveltyCheck
from coevo.operators.diff_edit import derived_seed
from coevo.operators.records import Proposal, Rejection
from coevo.run.config import RunConfig
from coevo.run.embedder_registry import embedder_class
from coevo.run.store import RunStore

Rewrite = Callable[[Sequence[int], SamplingParams], list[Proposal | Rejection]]
"""Asks the call's requests at `indices` again under `sampling` (a derived seed), each member under its
own weights, one answer per index."""


@dataclass(frozen=True)
class ProposalCall:
    """What the gate needs of the runner's proposal call to ask again and to record."""

    step: int
    sampling: SamplingParams
    ledger: BudgetLedger
    weights: Sequence[WeightsRef]
    """The weights each request is written under."""
    prompt_ids: Sequence[str | None]
    judge_weights: WeightsRef
    """The live weights, which the judge answers under."""
    rewrite: Rewrite


class NoveltyGate:
    """`NoveltyCheck` with bounded tries, writing what it does to the run store."""

    def __init__(self, check: NoveltyCheck, tries: int, store: RunStore) -> None:
        self.check = check
        self.tries = tries
        self.store = store

    @classmethod
    def from_config(cls, config: RunConfig, llm: LLM, store: RunStore) -> NoveltyGate | None:
        """The gate `[novelty]` describes, judging with the run's `llm` and starting from the vectors
        `store` holds; None when the check is off."""
        settings = config.novelty
        if not settings.enabled:
            return None
        embedder = embedder_class(settings.embedder).from_config(config, llm)
        return cls(NoveltyCheck(embedder, llm, settings.threshold, store.embeddings()), settings.tries, store)

    def screen(
        self, items: Sequence[Proposal | Rejection], members: Sequence[Candidate], call: ProposalCall
    ) -> list[Proposal | Rejection]:
        """`items` with each child the judge refused replaced by a new answer, up to `tries` children per
        request; a last child still refused becomes `NotNovel`."""
        items = list(items)
        codes = {member.key: member.code for member in members}
        pending = [index for index, item in enumerate(items) if isinstance(item, Proposal)]
        for attempt in range(1, self.tries + 1):
            refused = self._refused(items, pending, codes, call, attempt)
            if not refused:
                break
            if attempt == self.tries:
                for index, judgement in refused.items():
                    items[index] = _turned_away(items[index], judgement.reason(self.tries), NotNovel)
                break
            for index, judgement in refused.items():
                discarded = _turned_away(items[index], judgement.reason(attempt))
                self.store.add_llm_call(call.step, discarded, call.weights[index], call.prompt_ids[index])
            resampling = replace(call.sampling, seed=derived_seed(call.sampling.seed, f"novelty resample {attempt}"))
            for index, item in zip(refused, call.rewrite(list(refused), resampling), strict=True):
                items[index] = item
            pending = [index for index in refused if isinstance(items[index], Proposal)]
        return items

    def _refused(
        self,
        items: list[Proposal | Rejection],
        pending: list[int],
        members: dict[str, str],
        call: ProposalCall,
        attempt: int,
    ) -> dict[int, Judgement]:
        """Judge the children at `pending` and record it all; index -> judgement of each one refused."""
        children = [(code_key(items[index].code), items[index].code) for index in pending]
        for key, vector in self.check.embed(members | dict(children)).items():
            self.store.add_embedding(call.step, key, vector)
        judging = replace(call.sampling, seed=derived_seed(call.sampling.seed, f"novelty judge {attempt}"))
        refused = {}
        for index, judgement in zip(pending, self.check.judgements(children, members, judging, call.ledger)):
            if judgement is None:
                continue
            judge_call = self.store.add_llm_call(call.step, judgement.call, call.judge_weights, None)
            outcome = "novel" if judgement.novel else "rejected" if attempt == self.tries else "resampled"
            self.store.add_novelty_check(call.step, judgement, outcome, judge_call)
            if not judgement.novel:
                refused[index] = judgement
        return refused


def _turned_away(child: Proposal, reason: str, kind: type[Rejection] = Rejection) -> Rejection:
    """`child`'s answer as a rejection of `kind` for `reason`, its diff facts kept."""
    return kind(reason, child.operator, child.prompt, child.completion, child.parents, child.edit)
