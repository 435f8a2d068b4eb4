"""The run report: one self-contained HTML page showing what a run did and where its best heuristic came from.

It is built from the run store alone, so it can be written for a finished, interrupted or still
running run. Beside it goes lineage.html, every heuristic of the run as an interactive tree
(`coevo.run.lineage_page`), which the lineage section links to. Plots are PNG images embedded as data
URIs (matplotlib's Agg renderer, through `Figure` objects so no global pyplot state is touched), the
page needs no scripts and links nothing outside the run directory. Every string taken from the store
is HTML-escaped, its control characters and lone surrogates shown as escapes (``coevo.shown``): code,
thoughts and prompts are LLM output and may contain markup, or characters the page could not even
be written with.
"""

from __future__ import annotations

import base64
import html
import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from coevo.candidate import Candidate
from coevo.es.update_log import UpdateRecord
from coevo.llm.bandit import gain
from coevo.novelty import JUDGE
from coevo.run.heldout import heldout_lines, measured_curve
from coevo.run.learning_curve import curve_figure, training_rewards
from coevo.run.lineage_page import LINEAGE_NAME, kept_by_key, render_lineage_page
from coevo.run.model_choice import pulls
from coevo.run.store import NOVELTY_OUTCOMES, RunStore, StoredTrajectory
from coevo.run.validation import Validation, answer_line
from coevo.shown import shown
from coevo.skills.library import Library
from coevo.skills.timeline import LibraryAt, library_history
from tasks import get_task


def _html(text: str) -> str:
    """``text`` for the page: shown (``coevo.shown``, lines kept), then HTML-escaped."""
    return html.escape(shown(text, lines=True))


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
    """The whole page for one stored run."""
    config = store.config
    state = store.last_state() or {}
    candidates = store.candidates()
    best, _ = store.answer()
    title = f"coevo report: {config['method']} on {config['task']}"
    sections = [
        _section("Run", _run_table(store, config, state) + _validation(store)),
        _section("Objective", _objective_plot(candidates, config)),
        _section(
            "ES schedules and rewards", _es_plots(store.es_records(), [c for _, c in candidates], config["method"])
        ),
        _section("LLM tokens", _token_plot(store.llm_calls())),
        _section("Best heuristic", _best_code(best, store.answer_summary())),
        _section("Lineage of the best heuristic", _lineage(best, [c for _, c in candidates])),
        _section("How the prompts changed", _prompt_changes(store, state)),
        _section("Episodes", _episodes(store.trajectories())),
    ]
    if islands := _islands(config, state):
        sections.insert(5, _section("Islands and archive", islands))
    if models := _models(store):
        sections.insert(4, _section("Models of the ensemble", models))
    history = library_history(store.states())
    if history:
        sections.insert(-1, _section("Skill library", _skill_library(store, history)))
    if curve := _learning_curve(store):
        sections.insert(3, curve)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_html(title)}</title><style>{STYLE}</style></head>\n"
        f"<body><h1>{_html(title)}</h1>\n" + "\n".join(sections) + "\n</body></html>\n"
    )


# --- the run ---------------------------------------------------------------------------------------
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
    if config.get("novelty", {}).get("enabled"):
        rows[-1:-1] = _novelty_rows(store)
    return _table(rows)


def _novelty_rows(store: RunStore) -> list[tuple[str, str]]:
    """What the novelty check did: the children the judge saw, by outcome, and the judge's tokens."""
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


def _validation(store: RunStore) -> str:
    data = store.validation()
    if data is None:
        return '<p class="note">The best heuristic has not been validated on a held-out split.</p>'
    lines = Validation.from_json(data).lines()
    return (
        f"<h3>Validation ({_html(data['split'])} split)</h3><ul>"
        + "".join(f"<li>{_html(line)}</li>" for line in lines)
        + "</ul>"
    )


# --- plots -----------------------------------------------------------------------------------------
def _objective_plot(steps_and_candidates: Sequence[tuple[int, Candidate]], config: dict[str, Any]) -> str:
    """Every valid candidate, the best so far and each step's mean, against evaluations spent."""
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
    return _image(figure, "best and mean objective against evaluations") + f'<p class="note">{note}</p>'


def _seed_on_search(steps_and_candidates: Sequence[tuple[int, Candidate]], task: str) -> Candidate | None:
    """The task's seed heuristic as the run scored it on search (a library run scores it first)."""
    seed_key = Candidate(code=get_task(task).seed_code(), thought="", operator="library", generation=0).key
    return next((c for _, c in steps_and_candidates if c.key == seed_key and c.valid), None)


def _es_plots(records: Sequence[UpdateRecord], candidates: Sequence[Candidate], method: str) -> str:
    if not records:
        return f'<p class="note">No ES update in this run (method {_html(method)}).</p>'
    return _schedule_plot(records) + _reward_plot(records, invalid_members(records, candidates))


def invalid_members(records: Sequence[UpdateRecord], candidates: Iterable[Candidate]) -> list[int]:
    """Per ES update, its members that failed: no reward (an invalid episode or heuristic), or a
    heuristic written under the member's perturbation that is invalid (told as a penalty reward)."""
    failed = {
        (c.weights.step, c.weights.seed, c.weights.sign)
        for c in candidates
        if not c.valid and c.weights is not None and c.weights.seed is not None
    }
    return [
        sum(
            reward is None or (record.step, seed, sign) in failed
            for reward, seed, sign in zip(record.raw_rewards, record.seeds, record.signs, strict=True)
        )
        for record in records
    ]


def _schedule_plot(records: Sequence[UpdateRecord]) -> str:
    steps = [r.step for r in records]
    figure = Figure(figsize=(10, 3.2))
    sigma_axes, alpha_axes = figure.subplots(1, 2)
    for axes, values, name in (
        (sigma_axes, [r.sigma for r in records], "sigma"),
        (alpha_axes, [r.alpha for r in records], "alpha"),
    ):
        axes.plot(steps, values, marker="o", markersize=3)
        axes.set_xlabel("ES update")
        axes.set_ylabel(name)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
    figure.tight_layout()
    skipped = sum(r.update is None for r in records)
    note = f"{len(records)} ES updates" + (f", {skipped} skipped (every member invalid)." if skipped else ".")
    return _image(figure, "sigma and alpha schedules") + f'<p class="note">{note}</p>'


def _reward_plot(records: Sequence[UpdateRecord], invalid: Sequence[int]) -> str:
    """Raw rewards per update as box and strip; invalid members (`invalid_members`) counted in a panel below."""
    figure = Figure(figsize=(10, 5))
    rewards_axes, invalid_axes = figure.subplots(2, 1, sharex=True, height_ratios=(4, 1))
    jitter = np.random.default_rng(0)
    for record in records:
        valid = [r for r in record.raw_rewards if r is not None]
        if valid:
            rewards_axes.boxplot([valid], positions=[record.step], widths=0.6, showfliers=False, manage_ticks=False)
            offsets = jitter.uniform(-0.2, 0.2, len(valid))
            rewards_axes.scatter(record.step + offsets, valid, s=8, alpha=0.6, color="#1f77b4")
    rewards_axes.set_ylabel("raw reward")
    rewards_axes.grid(alpha=0.3)
    steps = [r.step for r in records]
    invalid_axes.bar(steps, invalid, color="#d62728")
    invalid_axes.set_ylabel("invalid")
    invalid_axes.set_xlabel("ES update")
    invalid_axes.set_ylim(0, max(1, *invalid))
    invalid_axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    invalid_axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    members = sum(len(record.raw_rewards) for record in records)
    note = (
        f"{members} members over {len(records)} ES updates, {sum(invalid)} of them invalid (lower panel); an invalid"
        " member that was told a penalty reward is also in the box above."
    )
    return _image(figure, "reward distributions per ES update") + f'<p class="note">{note}</p>'


def _token_plot(calls: Sequence[dict[str, Any]]) -> str:
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
    return _image(figure, "cumulative LLM tokens per step")


def _image(figure: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{_html(alt)}" src="data:image/png;base64,{data}">'


# --- the best heuristic and its ancestry -----------------------------------------------------------
def _best_code(best: Candidate | None, answer: dict[str, Any] | None) -> str:
    """The run's answer as `coevo runs show` and `coevo runs export` name it, each figure under its split."""
    if best is None or answer is None:
        return '<p class="note">No valid heuristic yet.</p>'
    facts = f"{answer_line(answer)}; written by {best.operator}"
    return f"<p>{_html(facts)}</p><p><em>{_html(best.thought)}</em></p><pre><code>{_html(best.code)}</code></pre>"


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


def _lineage(best: Candidate | None, candidates: Sequence[Candidate]) -> str:
    if best is None:
        return '<p class="note">No valid heuristic yet.</p>'
    rows = []
    for depth, candidate, repeated in lineage(best, candidates):
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
    table = _table(rows, ("candidate", "operator", "generation", "search objective", "prompt", "weights"))
    return f'<p class="note">{note}</p>' + table


# --- model ensembles ------------------------------------------------------------------------------
def _models(store: RunStore) -> str:
    """Per model of an ensemble: its calls and tokens, and the children the bandit judged it by with their
    mean gain on the best parent; "" for a run of one model."""
    usage = store.model_usage()
    if not usage:
        return ""
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
    return _table(rows, headers) + f'<p class="note">{_html(note)}</p>'


# --- population structure --------------------------------------------------------------------------
def _islands(config: dict[str, Any], state: dict[str, Any]) -> str:
    """Each island's size and best member, and with MAP-Elites the cells it fills of its grid; "" for
    EoH's single pool, which the lineage already shows."""
    settings = config.get("population") or {}
    islands = (state.get("islands") or {}).get("islands", [])
    grid = settings.get("archive") == "map-elites"
    if len(islands) < 2 and not grid:
        return ""
    headers = ["island", "members", "best search objective", "best candidate"]
    if grid:
        headers.append("occupied cells")
        cells = settings["feature_bins"] ** len(settings["features"])
    rows = []
    for index, island in enumerate(islands):
        best = island["members"][:1]
        row = [index, len(island["members"]), *((best[0]["objective"], best[0]["key"]) if best else ("-", "-"))]
        rows.append([*row, f"{len(island['members'])} / {cells}"] if grid else row)
    note = f"Features: {', '.join(settings['features'])}, {settings['feature_bins']} bins each." if grid else ""
    return _table(rows, headers) + (f'<p class="note">{_html(note)}</p>' if note else "")


# --- prompts ---------------------------------------------------------------------------------------
def _prompt_changes(store: RunStore, state: dict[str, Any]) -> str:
    """Every prompt variant (the initial ones, then each rewrite with its parent's text beside it)."""
    first = next(store.states(), None)
    initial = [] if first is None else first["prompts"]
    rewrites = store.prompts()
    final = {v["id"]: v for v in state.get("prompts", [])}
    rows = []
    for variant in [*initial, *rewrites]:
        kept = final.get(variant["id"])
        rows.append(
            (
                variant["id"],
                variant["parent"] or "-",
                variant["changed"] or "-",
                variant.get("step", 0),
                "evicted" if kept is None else kept["uses"],
                "evicted" if kept is None else f"{kept['score']:.4g}" if kept["uses"] else "untried",
            )
        )
    table = _table(rows, ("variant", "parent", "changed component", "made at step", "uses", "score (mean reward)"))
    if not rewrites:
        return table + '<p class="note">The prompts did not change in this run.</p>'
    texts = {v["id"]: v for v in [*initial, *rewrites]}
    details = "".join(_rewrite_details(variant, texts.get(variant["parent"])) for variant in rewrites)
    return table + details


def _rewrite_details(variant: dict[str, Any], parent: dict[str, Any] | None) -> str:
    component = variant["changed"]

    def text(of: dict[str, Any]) -> str:
        return (of["notes"] if component == "notes" else of["templates"][component]) or "(empty)"

    before = "" if parent is None else f"<p>before ({_html(parent['id'])}):</p><pre>{_html(text(parent))}</pre>"
    return (
        f"<details><summary>{_html(variant['id'])}: rewrote {_html(component)}</summary>"
        f"{before}<p>after:</p><pre>{_html(text(variant))}</pre></details>"
    )


# --- episodes --------------------------------------------------------------------------------------
def shown_episodes(stored: Iterable[StoredTrajectory]) -> dict[int, list[tuple[str, StoredTrajectory]]]:
    """Per generation, its best, median and worst episode by reward; one picked twice is shown once."""
    by_generation: dict[int, list[StoredTrajectory]] = defaultdict(list)
    for item in stored:
        by_generation[item.generation].append(item)
    shown = {}
    for generation, items in sorted(by_generation.items()):
        ranked = sorted(items, key=lambda item: item.trajectory.reward, reverse=True)  # stable: ties keep their order
        picks: dict[int, str] = {}
        for label, index in (("best", 0), ("median", (len(ranked) - 1) // 2), ("worst", len(ranked) - 1)):
            picks.setdefault(index, label)
        shown[generation] = [(label, ranked[index]) for index, label in picks.items()]
    return shown


def _episodes(stored: Sequence[StoredTrajectory]) -> str:
    if not stored:
        return '<p class="note">The workload returned no episodes (heuristic design scores code, not episodes).</p>'
    blocks = []
    for generation, picks in shown_episodes(stored).items():
        blocks.append(f"<h3>Generation {generation}</h3>")
        for label, item in picks:
            episode = item.trajectory
            summary = (
                f"{label}: reward {episode.reward:.4g} on {episode.instance}, {len(episode.turns)} turns"
                f" (candidate {item.candidate})"
            )
            turns = [
                (index, turn.observation, turn.action, turn.reward, turn.tokens)
                for index, turn in enumerate(episode.turns, start=1)
            ]
            table = _table(turns, ("turn", "observation", "action", "reward", "tokens"))
            blocks.append(f'<details><summary>{_html(summary)}</summary><div class="episode">{table}</div></details>')
    note = f"{len(stored)} episodes stored; each generation's best, median and worst by reward are shown."
    return f'<p class="note">{note}</p>' + "".join(blocks)


def _learning_curve(store: RunStore) -> str:
    heldout = measured_curve(store.heldout_figures())
    if not heldout:
        return ""
    train = training_rewards(store.es_records())
    note = (
        f"Held-out success measured {len(heldout)} times on the same {heldout[0].episodes} {heldout[0].split}"
        " episodes (set `workload.heldout_every` for more points); training rewards are the members' own, on"
        " each generation's search episodes."
    )
    return _section(
        "Learning curve", _image(curve_figure(train, heldout), "learning curve") + f'<p class="note">{note}</p>'
    )


# --- HTML pieces -----------------------------------------------------------------------------------
def _skill_library(store: RunStore, history: Sequence[LibraryAt]) -> str:
    """Held-out success with the library it was measured with, the library's edits generation by
    generation, and each skill's credit and uses as they stood after every generation."""
    lines = "".join(f"<li>{_html(line)}</li>" for line in heldout_lines(store.heldout_figures()))
    measured = f"<h3>Held-out success</h3><ul>{lines}</ul>" if lines else ""
    changes = _table(
        (
            (
                at.generation,
                len(at.library),
                ", ".join(at.added) or "-",
                ", ".join(at.removed) or "-",
                "; ".join(f"{e.op}: {e.summary}" for e in at.edits) or "-",
            )
            for at in history
        ),
        ("generation", "skills", "added", "removed", "edits (add, replace-section, merge, delete)"),
    )
    names = sorted({name for at in history for name in at.library})

    def cell(library: Library, name: str) -> str:
        if name not in library:
            return "-"
        meta = library[name].meta
        credit = "no estimate" if meta.credit is None else f"{meta.credit:+.3g}"
        return f"{credit} ({meta.uses} uses)"

    credit = _table(
        ((name, *(cell(at.library, name) for at in history)) for name in names),
        ("skill", *(f"gen {at.generation}" for at in history)),
    )
    note = (
        '<p class="note">Credit: mean reward of the members shown the skill minus that of the members '
        "not shown it, averaged over the generations that had both.</p>"
    )
    return measured + "<h3>Changes</h3>" + changes + "<h3>Credit and uses</h3>" + note + credit


def _section(title: str, body: str) -> str:
    return f"<section><h2>{_html(title)}</h2>\n{body}\n</section>"


def _table(rows: Iterable[Sequence[Any]], headers: Sequence[str] = ()) -> str:
    """A table of escaped cells, with a header row when `headers` are given; numbers are right-aligned."""
    head = "<tr>" + "".join(f"<th>{_html(h)}</th>" for h in headers) + "</tr>" if headers else ""
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{cell}</td>' if isinstance(cell, int | float) else f"<td>{_html(str(cell))}</td>"
            for cell in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table>{head}{body}</table>"
