"""The model ensemble's section of report.html: what each model of `[llm] models` cost and what the
bandit that chose among them (`coevo.run.model_choice`) judged it by."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from coevo.llm.bandit import gain
from coevo.run.model_choice import pulls
from coevo.run.report_html import escaped, table
from coevo.run.report_section import ReportSection

if TYPE_CHECKING:
    from coevo.run.store import RunStore


def models(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Per model of an ensemble: its calls and tokens, and the children the bandit judged it by with their
    mean gain on the best parent; None for a run of one model."""
    usage = store.model_usage()
    if not usage:
        return None
    gains: dict[str, list[float]] = defaultdict(list)
    for pull in pulls(store):
        gains[pull.arm].append(gain(pull))
    rows = [
        [
            model,
            used["calls"],
            used["prompt_tokens"],
            used["completion_tokens"],
            len(gains[model]),
            float(f"{np.mean(gains[model]):.4g}") if gains[model] else "-",
        ]
        for model, used in usage.items()
    ]
    headers = ["model", "calls", "prompt tokens", "completion tokens", "children judged", "mean improvement"]
    note = (
        "Children judged: those the model wrote from parents under weights the bandit chose (ES members "
        "excluded). Improvement: the child's fitness over its best parent's, clipped below at 0."
    )
    return table(rows, headers) + f'<p class="note">{escaped(note)}</p>'


MODELS_SECTION = ReportSection("Models of the ensemble", models)
