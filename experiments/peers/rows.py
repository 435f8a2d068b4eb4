"""The head-to-head table from finished cells: one row per (system, task), mean +- std over seeds.

A cell is one run of one system on one task with one seed, stored as a JSON record by table.py.
This module only reads records, so it is what the unit tests check and what --json prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import mean, stdev
from typing import Any

SYSTEMS = ("coevo-eoh", "coevo", "openevolve", "llm4ad", "shinka")
SEED = "seed (no search)"
"""The reference row: the seed heuristic every system starts from, scored the same way."""
ROW_KEYS = (
    "system", "task", "seeds", "search_gap", "val_gap", "test_gap", "evaluations", "llm_calls", "tokens", "wall_s",
    "valid_share", "cut_share", "note",
)  # fmt: skip


def best_so_far(gaps: Sequence[float | None]) -> list[float | None]:
    """After each evaluation, the lowest valid gap so far (None until one is valid)."""
    curve: list[float | None] = []
    best: float | None = None
    for gap in gaps:
        if gap is not None and math.isfinite(gap) and (best is None or gap < best):
            best = gap
        curve.append(best)
    return curve


def spread(values: Iterable[float | None]) -> dict[str, float | int] | None:
    """{"mean", "std", "n"} over the values that exist (std 0 for one value); None if none do."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"mean": mean(present), "std": stdev(present) if len(present) > 1 else 0.0, "n": len(present)}


def table_rows(cells: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (system, task), the seed's first then SYSTEMS order; failed cells only contribute
    their reason. A seed record has the seed's gaps and no search, so only its gaps are filled."""
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for cell in cells:
        grouped.setdefault((cell["system"], cell["task"]), []).append(cell)
    order = {name: i for i, name in enumerate((SEED, *SYSTEMS))}
    rows = []
    for (system, task), group in sorted(grouped.items(), key=lambda item: (item[0][1], order.get(item[0][0], 99))):
        done = [c for c in group if c["status"] == "done"]
        reasons = sorted({c["error"] for c in group if c["status"] != "done"})
        empty = sorted(c["seed"] for c in done if c["search_gap"] is None and c.get("seed") is not None)
        if empty:  # the gaps' means leave these seeds out, so the row says which they are
            reasons.append(f"no valid heuristic on seed {', '.join(map(str, empty))}")
        rows.append(
            {
                "system": system,
                "task": task,
                "seeds": sorted(c["seed"] for c in done if c.get("seed") is not None),
                "search_gap": spread(c["search_gap"] for c in done),
                "val_gap": spread(c["val_gap"] for c in done),
                "test_gap": spread(c["test_gap"] for c in done),
                "evaluations": spread(c.get("evaluations") for c in done),
                "llm_calls": spread(c.get("llm_calls") for c in done),
                "tokens": spread(c["prompt_tokens"] + c["completion_tokens"] for c in done if "prompt_tokens" in c),
                "wall_s": spread(c.get("wall_s") for c in done),
                "valid_share": spread(c.get("valid_share") for c in done),
                "cut_share": spread(c.get("cut_share") for c in done),  # cells from before transcripts lack it
                "note": "; ".join(reasons),
            }
        )
    return rows


def format_spread(value: Mapping[str, float | int] | None, digits: int, seeds: int) -> str:
    """Mean +- std, and over how many of the row's seeds when some lack the value."""
    if value is None:
        return "-"
    text = (
        f"{value['mean']:.{digits}f}" if value["n"] == 1 else f"{value['mean']:.{digits}f} +- {value['std']:.{digits}f}"
    )
    return text + (f" ({value['n']} of {seeds} seeds)" if value["n"] < seeds else "")


def format_count(value: Mapping[str, float | int] | None, seeds: int) -> str:
    """A count's mean, whole when it is whole: rounding 0.5 evaluations to "0" would read as none."""
    whole = value is None or float(value["mean"]).is_integer()
    return format_spread(value, 0 if whole else 1, seeds)


def markdown(rows: Sequence[Mapping[str, Any]], model: str, budget: int, max_tokens: int = 384) -> str:
    """The table as Markdown, with what its columns mean."""
    lines = [
        f"Model `{model}` behind `coevo serve`, answers capped at {max_tokens} new tokens; budget {budget} candidate",
        "evaluations per run; gaps in % of each run's search-best heuristic on coevo's search split (where it",
        "was picked) and on its val and test splits, mean +- std over the seeds listed. LLM calls and tokens:",
        "the server's ledger (coevo methods: their run store). Every system is given the seed heuristic; all but",
        "LLM4AD evaluate it first (LLM4AD's EoH only shows it in its prompts). Valid share: of the evaluations.",
        f"Cut share: the share of answers that stopped at the {max_tokens}-token cap (server transcript or run store).",
        "",
        "| system | task | seeds | search gap % | val gap % | test gap % | evaluations | LLM calls | tokens | wall s "
        "| valid share | cut share | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        seeds = ",".join(map(str, row["seeds"])) or "-"
        n = len(row["seeds"])
        cells = [
            row["system"], row["task"], seeds,
            format_spread(row["search_gap"], 2, n), format_spread(row["val_gap"], 2, n), format_spread(row["test_gap"], 2, n),
            format_count(row["evaluations"], n), format_count(row["llm_calls"], n), format_spread(row["tokens"], 0, n),
            format_spread(row["wall_s"], 0, n), format_spread(row["valid_share"], 2, n), format_spread(row["cut_share"], 2, n), row["note"] or "",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    if not rows:
        lines.append("\nNo cell has finished yet: this table is still to be measured.")
    return "\n".join(lines) + "\n"
