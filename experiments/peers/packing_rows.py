"""The circle-packing table from cell records: per system one line per seed, then mean +- std over seeds.

A packing cell is a table.py cell record on a circle_packing task. Its best sum of radii is the run's
best program (picked by the run's own evaluations) re-scored by coevo's sandboxed Evaluator, whose
verifier is exact ("val_objective": every split holds the same one instance); the gap is to the
published record. This module only reads records: a (system, seed) without one reads "not yet run",
never a figure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rows import SEED, format_count, format_spread, spread

NOT_RUN = "not yet run"
RUN_KEYS = (
    "seed", "status", "best_sum", "gap_abs", "gap_pct", "evaluations", "llm_calls", "tokens", "wall_s", "valid_share",
    "cpu", "note",
)  # fmt: skip
MEASURES = ("best_sum", "gap_abs", "gap_pct", "evaluations", "llm_calls", "tokens", "wall_s", "valid_share")


def run_row(cell: Mapping[str, Any] | None, seed: int | None, record: float) -> dict[str, Any]:
    """One run's line: the verifier's best sum, its gap to `record` (absolute and %), the run's use."""
    row: dict[str, Any] = dict.fromkeys(RUN_KEYS)
    row.update(seed=seed, status=NOT_RUN if cell is None else cell["status"], note="")
    if cell is None:
        return row
    if cell["status"] != "done":
        row.update(cpu=cell.get("cpu"), note=cell.get("error", ""))
        return row
    best = cell.get("val_objective")
    tokens = cell["prompt_tokens"] + cell["completion_tokens"] if "prompt_tokens" in cell else None
    row.update(
        best_sum=best,
        gap_abs=None if best is None else record - best,
        gap_pct=cell.get("val_gap"),
        evaluations=cell.get("evaluations"),
        llm_calls=cell.get("llm_calls"),
        tokens=tokens,
        wall_s=cell.get("wall_s"),
        valid_share=cell.get("valid_share"),
        cpu=cell.get("cpu"),
        note="" if best is not None else "no valid packing",
    )
    return row


def packing_rows(
    cells: Iterable[Mapping[str, Any]], task: str, systems: Sequence[str], seeds: Sequence[int], record: float
) -> list[dict[str, Any]]:
    """One block per system, the seed's first: {"system", "runs": a row per seed (the seeds asked for
    and any other recorded), "mean": {measure: mean/std/n over the finished runs}}."""
    cells = [cell for cell in cells if cell["task"] == task]
    blocks = []
    seed_cells = [cell for cell in cells if cell["system"] == SEED]
    if seed_cells:
        blocks.append({"system": SEED, "runs": [run_row(seed_cells[0], None, record)], "mean": None})
    for system in systems:
        by_seed = {cell["seed"]: cell for cell in cells if cell["system"] == system}
        runs = [run_row(by_seed.get(seed), seed, record) for seed in sorted({*seeds, *by_seed})]
        done = [run for run in runs if run["status"] == "done"]
        mean = {measure: spread(run[measure] for run in done) for measure in MEASURES} if done else None
        blocks.append({"system": system, "runs": runs, "mean": mean})
    return blocks


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(
    blocks: Sequence[Mapping[str, Any]],
    task: str,
    record: float,
    intro: Mapping[str, Any],
    command_of: Callable[[str, int], str],
) -> str:
    """The table as Markdown: what its columns mean (intro: model, budget, max_tokens), the CPUs the
    runs used, a line per run ("not yet run" with the command that runs it), a mean +- std per system."""
    cpus = sorted({run["cpu"] for block in blocks for run in block["runs"] if run["cpu"]})
    lines = [
        f"`{task}`: the best sum of radii of each run, its best program re-scored by coevo's exact verifier (no",
        f"tolerance) in coevo's sandbox; gap to the published record {record} absolute and in %. Model",
        f"`{intro['model']}` behind `coevo serve` (coevo's arms load it in-process), answers capped at",
        f"{intro['max_tokens']} new tokens, budget {intro['budget']} candidate evaluations per run. Tokens:",
        "prompt + completion, from the server's ledger (coevo's arms: their run store). Mean +- std over the",
        f"finished seeds. CPU (lscpu model name): {', '.join(cpus) or 'no run yet'}.",
        "",
        "| system | seed | best sum of radii | gap | gap % | evaluations | LLM calls | tokens | wall s | valid share | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for block in blocks:
        system = block["system"]
        for run in block["runs"]:
            seed = "-" if run["seed"] is None else str(run["seed"])
            if run["status"] == NOT_RUN:
                lines.append(f"| {system} | {seed} | {NOT_RUN} | | | | | | | | `{command_of(system, run['seed'])}` |")
                continue
            cells = [
                system, seed, _number(run["best_sum"], 10), _number(run["gap_abs"], 10), _number(run["gap_pct"], 4),
                _number(run["evaluations"], 0), _number(run["llm_calls"], 0), _number(run["tokens"], 0),
                _number(run["wall_s"], 0), _number(run["valid_share"], 2), run["note"],
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        mean = block["mean"]
        if block["system"] != SEED:
            n = sum(run["status"] == "done" for run in block["runs"])
            if mean is None:
                ran = any(run["status"] != NOT_RUN for run in block["runs"])
                lines.append(f"| {system} | mean +- std | {'no finished run' if ran else NOT_RUN} | | | | | | | | |")
                continue
            cells = [
                system, "mean +- std", format_spread(mean["best_sum"], 6, n), format_spread(mean["gap_abs"], 6, n),
                format_spread(mean["gap_pct"], 4, n), format_count(mean["evaluations"], n),
                format_count(mean["llm_calls"], n), format_spread(mean["tokens"], 0, n),
                format_spread(mean["wall_s"], 0, n), format_spread(mean["valid_share"], 2, n), f"{n} finished",
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
