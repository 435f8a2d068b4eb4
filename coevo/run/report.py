"""The run report: one self-contained HTML page showing what a run did and where its best heuristic came from.

It is built from the run store alone, so it can be written for a finished, interrupted or still
running run. This module renders what every run has (its facts and validation, the objective and token
plots, the best heuristic and its lineage); the components a run may use (the ES engine, a model
ensemble, islands) and its method and workload classes (their `report_sections`) render the rest, each
in its own module (`coevo.run.report_section`). Beside it goes lineage.html, every heuristic of the run as an interactive tree
(`coevo.run.lineage_page`), which the lineage section links to. Plots are PNG images embedded as data
URIs (matplotlib's Agg renderer, through `Figure` objects so no global pyplot state is touched), the
page needs no scripts and links nothing outside the run directory. Every string taken from the store
is HTML-escaped, its control characters and lone surrogates shown as escapes (``coevo.shown``): code,
thoughts and prompts are LLM output and may contain markup, or characters the page could not even
be written with.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from coevo.candidate import Candidate
from coevo.plugins import PluginError
from coevo.run.ensemble_report import MODELS_SECTION
from coevo.run.es_report import ES_SECTION
from coevo.run.islands_report import ISLANDS_SECTION
from coevo.run.lineage_page import LINEAGE_NAME, kept_by_key, render_lineage_page
from coevo.run.method_registry import method_class
from coevo.run.novelty_report import novelty_rows
from coevo.run.report_html import escaped, image, section, table
from coevo.run.report_section import ReportSection
from coevo.run.store import RunStore
from coevo.run.validation import Validation, answer_line
from coevo.run.workload_registry import workload_class
from coevo.workload import WorkloadSettings
from tasks import get_task

REPORT_NAME = "report.html"
LINEAGE_ROWS = 200
"""Lineage rows shown at most; a long run's ancestry of m1/m2 chains can run to hundreds."""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; } th, td { border: 1px solid #ddd; padding: .25em .6em;
text-align: left; vertical-align: top; } th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: .8em; overflow-x: auto; white-space: pre-wrap; }
img { max-width: 100%; display: block; margin: .5em 0; } .note { color: #666; }
.episode td { white-space: pre-wrap; font-family: monospace; font-size: .9em; }
"""


def write_report(run_dir: Path) -> Path:
    """Write RUN_DIR/report.html and RUN_DIR/lineage.html for the run stored in `run_dir` and return
    the report's path.

    Raises `coevo.run.store.StoreError` when `run_dir` holds no readable run.
    """
    store = RunStore.open(Path(run_dir))
    try:
        page = render_report(store)
        tree = render_lineage_page(store)
    finally:
        store.close()
    (Path(run_dir) / LINEAGE_NAME).write_text(tree, encoding="utf-8")
    path = Path(run_dir) / REPORT_NAME
    path.write_text(page, encoding="utf-8")
    return path


def render_report(store: RunStore) -> str:
    """The whole page for one stored run: what every run has, with the sections of the components it
    used and of its method and workload (`coevo.run.report_section`) each in its place."""
    config = store.config
    state = store.last_state() or {}
    title = f"coevo report: {config['method']} on {config['task']}"
    owned, unloaded = _owned_sections(config)
    order = (
        RUN,
        OBJECTIVE,
        ES_SECTION,
        *(s for s in owned if s.place == "plots"),
        TOKENS,
        MODELS_SECTION,
        BEST,
        ISLANDS_SECTION,
        LINEAGE,
        *(s for s in owned if s.place == "details"),
    )
    bodies = [(part.title, part.render(store, config, state)) for part in order]
    sections = [section(name, body) for name, body in bodies if body is not None]
    if unloaded:
        notes = "".join(f'<p class="note">{escaped(error)}; its sections are left out.</p>' for error in unloaded)
        sections.append(section("Sections not shown", notes))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escaped(title)}</title><style>{STYLE}</style></head>\n"
        f"<body><h1>{escaped(title)}</h1>\n" + "\n".join(sections) + "\n</body></html>\n"
    )


def _owned_sections(config: dict[str, Any]) -> tuple[list[ReportSection], list[str]]:
    """The `report_sections` of the run's method, then of its workload; and why a plugin that no longer
    loads here (a file moved since the run) has none on the page."""
    kind = (config.get("workload") or {}).get("kind", WorkloadSettings.model_fields["kind"].default)
    owned: list[ReportSection] = []
    unloaded: list[str] = []
    for lookup, name in ((method_class, config["method"]), (workload_class, kind)):
        try:
            owned += getattr(lookup(name), "report_sections", ())
        except PluginError as error:
            unloaded.append(str(error))
    return owned, unloaded


# --- the run ---------------------------------------------------------------------------------------
def _run(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    return _run_table(store, config, state) + _validation(store)


def _run_table(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    totals = store.llm_totals()
    rows = [
        ("method", config["method"]),
        ("task", config["task"]),
        ("model", config["model"]),
        ("budget (evaluations)", str(config["budget"])),
        ("seed", str(config["seed"])),
        ("status", store.status()),
        ("evaluations", str(state.get("evaluations", 0))),
        ("LLM calls", str(store.llm_call_count())),
        ("LLM tokens (prompt / completion)", f"{totals['prompt_tokens']} / {totals['completion_tokens']}"),
        ("final weights sha256", state.get("weights_sha256") or "none (no weights evolved)"),
    ]
    edits = store.edit_counts()
    if any(edits.values()):
        rows.insert(-1, ("diff answers (applied / failed / fallback)", " / ".join(str(n) for n in edits.values())))
    rows[-1:-1] = novelty_rows(store, config)
    return table(rows)


def _validation(store: RunStore) -> str:
    data = store.validation()
    if data is None:
        return '<p class="note">The best heuristic has not been validated on a held-out split.</p>'
    lines = Validation.from_json(data).lines()
    return (
        f"<h3>Validation ({escaped(data['split'])} split)</h3><ul>"
        + "".join(f"<li>{escaped(line)}</li>" for line in lines)
        + "</ul>"
    )


# --- plots -----------------------------------------------------------------------------------------
def _objective_plot(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    """Every valid candidate, the best so far and each step's mean, against evaluations spent."""
    steps_and_candidates = store.candidates()
    if not steps_and_candidates:
        return '<p class="note">No candidate has been evaluated yet.</p>'
    method = config["method"]
    sense = get_task(config["task"]).sense
    valid_x, valid_y, best_x, best_y = [], [], [], []
    step_objectives: dict[int, list[float]] = defaultdict(list)
    step_end: dict[int, int] = {}
    best: Candidate | None = None
    for evaluations, (step, candidate) in enumerate(steps_and_candidates, start=1):
        step_end[step] = evaluations
        if not candidate.valid:
            continue
        valid_x.append(evaluations)
        valid_y.append(candidate.objective)
        step_objectives[step].append(candidate.objective)
        if best is None or candidate.fitness > best.fitness:
            best = candidate
        best_x.append(evaluations)
        best_y.append(best.objective)
    invalid = len(steps_and_candidates) - len(valid_x)
    if best is None:
        return f'<p class="note">None of the {invalid} candidates is valid.</p>'
    figure = Figure(figsize=(10, 4.5))
    axes = figure.subplots()
    axes.scatter(valid_x, valid_y, s=12, color="#bbbbbb", label="valid candidate")
    seed = _seed_on_search(steps_and_candidates, config["task"])
    if seed is not None:
        axes.axhline(seed.objective, color="#555555", linestyle="--", linewidth=1, label="seed heuristic")
    means = sorted((step_end[step], float(np.mean(values))) for step, values in step_objectives.items())
    axes.plot(
        *zip(*means, strict=True), marker="o", markersize=3, label=f"{method}: mean of the step's valid candidates"
    )
    axes.step(best_x, best_y, where="post", linewidth=2, label=f"{method}: best so far on search")
    axes.set_xlabel("evaluations")
    axes.set_ylabel(f"objective on the search split ({'lower' if sense == 'min' else 'higher'} is better)")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    note = f"{len(steps_and_candidates)} candidates, {invalid} invalid (not plotted)."
    if seed is None:
        note += " The seed heuristic was not scored on the search split (library = none), so it has no line."
    else:
        note += f" Dashed: the seed heuristic, objective {seed.objective:.6g} on search."
    return image(figure, "best and mean objective against evaluations") + f'<p class="note">{note}</p>'


def _seed_on_search(steps_and_candidates: Sequence[tuple[int, Candidate]], task: str) -> Candidate | None:
    """The task's seed heuristic as the run scored it on search (a library run scores it first)."""
    seed_key = Candidate(code=get_task(task).seed_code(), thought="", operator="library", generation=0).key
    return next((c for _, c in steps_and_candidates if c.key == seed_key and c.valid), None)


def _token_plot(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    calls = store.llm_calls()
    if not calls:
        return '<p class="note">No LLM call in this run.</p>'
    per_step: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for call in calls:
        per_step[call["step"]][0] += call["prompt_tokens"] or 0
        per_step[call["step"]][1] += call["completion_tokens"] or 0
    steps = sorted(per_step)
    figure = Figure(figsize=(10, 3.5))
    axes = figure.subplots()
    for index, name in enumerate(("prompt", "completion")):
        axes.plot(steps, list(accumulate(per_step[s][index] for s in steps)), marker="o", markersize=3, label=name)
    axes.set_xlabel("run step")
    axes.set_ylabel("cumulative tokens")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return image(figure, "cumulative LLM tokens per step")


# --- the best heuristic and its ancestry -----------------------------------------------------------
def _best_code(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    """The run's answer as `coevo runs show` and `coevo runs export` name it, each figure under its split."""
    best, _ = store.answer()
    answer = store.answer_summary()
    if best is None or answer is None:
        return '<p class="note">No valid heuristic yet.</p>'
    facts = f"{answer_line(answer)}; written by {best.operator}"
    return f"<p>{escaped(facts)}</p><p><em>{escaped(best.thought)}</em></p><pre><code>{escaped(best.code)}</code></pre>"


def lineage(best: Candidate, candidates: Iterable[Candidate]) -> list[tuple[int, Candidate, bool]]:
    """(depth, candidate, already listed) rows of the best's ancestry, depth first.

    A key maps to the candidate the population kept (`kept_by_key`); an ancestor reached twice
    (crossovers share ancestors) is listed again without its own ancestry.
    """
    by_key = kept_by_key(candidates)
    rows: list[tuple[int, Candidate, bool]] = []
    listed: set[str] = set()
    pending = [(0, best)]
    while pending and len(rows) < LINEAGE_ROWS:
        depth, candidate = pending.pop()
        repeated = candidate.key in listed
        rows.append((depth, candidate, repeated))
        listed.add(candidate.key)
        if not repeated:
            parents = [by_key[key] for key in candidate.parents if key in by_key]
            pending += [(depth + 1, parent) for parent in reversed(parents)]
    return rows


def _lineage(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    best, _ = store.answer()
    if best is None:
        return '<p class="note">No valid heuristic yet.</p>'
    rows = []
    for depth, candidate, repeated in lineage(best, [c for _, c in store.candidates()]):
        label = (
            "\u00a0\u00a0" * depth + ("└ " if depth else "") + candidate.key + (" (listed above)" if repeated else "")
        )
        rows.append(
            (
                label,
                candidate.operator,
                candidate.generation,
                "invalid" if candidate.objective is None else f"{candidate.objective:.6g}",
                candidate.prompt_id or "default",
                "none" if candidate.weights is None else candidate.weights.label(),
            )
        )
    note = (
        "Each heuristic is followed by the parents shown in its prompt, indented. Weights "
        "<code>model@N</code>: the base model after N ES updates; <code>model@N+s</code> or "
        "<code>model@N-s</code>: those weights plus (or minus) the ES perturbation drawn from seed s "
        "(hexadecimal, first 8 digits); none: a library heuristic, which no model wrote. "
        f'<a href="{LINEAGE_NAME}">{LINEAGE_NAME}</a> shows every heuristic of the run as a tree, each with its'
        " score, operator, model, island and diff against its parent."
    )
    ancestry = table(rows, ("candidate", "operator", "generation", "search objective", "prompt", "weights"))
    return f'<p class="note">{note}</p>' + ancestry


# --- what every run has ----------------------------------------------------------------------------
RUN = ReportSection("Run", _run)
OBJECTIVE = ReportSection("Objective", _objective_plot)
TOKENS = ReportSection("LLM tokens", _token_plot)
BEST = ReportSection("Best heuristic", _best_code)
LINEAGE = ReportSection("Lineage of the best heuristic", _lineage)
