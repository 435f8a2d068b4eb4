"""Metered LLM calls: every operator's generate goes through `metered_generate`, so the run's ledger
sees each call. The ledger itself (`BudgetLedger`) lives in `coevo.llm.ledger`, below the operators,
because `coevo serve` keeps one too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from coevo.llm.base import LLM, Completion, Message, SamplingParams
from coevo.llm.ledger import BudgetLedger


def metered_generate(
    llm: LLM,
    requests: Sequence[Sequence[Message]],
    sampling: SamplingParams,
    ledger: BudgetLedger,
    operator: str,
) -> list[Completion]:
    """`llm.generate` that records the call in the ledger and checks one completion came per request."""
    started = time.perf_counter()
    completions = llm.generate(requests, sampling)
    ledger.record(llm.name, operator, completions, time.perf_counter() - started)
    if len(completions) != len(requests):
        raise RuntimeError(f"LLM {llm.name!r} returned {len(completions)} completions for {len(requests)} requests")
    return completions
