"""What the novelty check (`coevo.run.novelty_gate`) did in a run, as rows of report.html's run table."""

from __future__ import annotations

from typing import Any

from coevo.novelty import JUDGE
from coevo.run.store import NOVELTY_OUTCOMES, RunStore


def novelty_rows(store: RunStore, config: dict[str, Any]) -> list[tuple[str, str]]:
    """The children the judge saw, by outcome, and the judge's tokens; none where `[novelty]` is off."""
    if not config.get("novelty", {}).get("enabled"):
        return []
    counts, judge = store.novelty_counts(), store.llm_totals(JUDGE)
    return [
        (
            "novelty: children judged (novel / resampled / rejected, never evaluated)",
            " / ".join(str(counts[outcome]) for outcome in NOVELTY_OUTCOMES),
        ),
        (
            "novelty judge: calls, tokens (prompt / completion)",
            f"{judge['calls']}, {judge['prompt_tokens']} / {judge['completion_tokens']}",
        ),
    ]
