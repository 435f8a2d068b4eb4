"""The run report: real small runs (scripted LLM) rendered to HTML, checked for content, escaping and rendering."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import replace
from html import escape
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from scripted_llm import ScriptedLLM

from coevo.candidate import Candidate
from coevo.run.config import validate
from coevo.run.es_report import invalid_members
from coevo.run.report import lineage, render_report, write_report
from coevo.run.runner import Runner
from coevo.run.session import start_run
from coevo.run.store import RunStore, StoreError
from coevo.run.validation import Validation
from coevo.workload import Evaluation, Member, Trajectory, Turn

SECTIONS = (
    "Run",
    "Objective",
    "ES schedules and rewards",
    "LLM tokens",
    "Best heuristic",
    "Lineage of the best heuristic",
    "How the prompts changed",
)
SMALL_RUN = {
    "task": "tsp_construct",
    "model": "scripted_llm:build",
    "budget": 16,
    "seed": 3,
    "library": "none",
    "population_size": 4,
    "eval": {"limit": 2},
    "es": {"sigma": 0.05, "alpha": 0.05},
}
HOSTILE = "</pre><script>alert(1)</script>"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class HostileLLM(ScriptedLLM):
    """The scripted LLM with markup smuggled into every answer: a comment in code, a tail on prose."""

    def generate(self, requests, sampling):
        return [replace(c, text=_smuggle(c.text)) for c in super().generate(requests, sampling)]


def _smuggle(text: str) -> str:
    if "```python" in text:
        return text.replace("import numpy as np", f"import numpy as np  # {HOSTILE}", 1)
    return f"{text} {HOSTILE}"


def _run(run_dir: Path, method: str, llm=None) -> Path:
    # Seed 3 without the library: the best is an evolved child, so its lineage has ancestors.
    runner = start_run(validate({**SMALL_RUN, "method": method}), run_dir, llm)
    runner.run()
    runner.store.close()
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A prompt-only run (eoh) and a weights-and-prompts run (coevo), each with its report written."""
    root = tmp_path_factory.mktemp("report-runs")
    dirs = {method: _run(root / method.replace("+", "_"), method) for method in ("eoh", "coevo")}
    for run_dir in dirs.values():
        write_report(run_dir)
    return dirs


def _page(run_dir: Path) -> str:
    return (run_dir / "report.html").read_text(encoding="utf-8")


def _section(page: str, title: str) -> str:
    match = re.search(rf"<section><h2>{re.escape(title)}</h2>(.*?)</section>", page, re.S)
    assert match, f"section {title!r} missing"
    return match.group(1)


def _stored(run_dir: Path) -> tuple[dict, list[Candidate], list[dict]]:
    store = RunStore.open(run_dir)
    try:
        return store.last_state(), [c for _, c in store.candidates()], store.prompts()
    finally:
        store.close()


@pytest.mark.parametrize("method", ["eoh", "coevo"])
def test_page_has_every_section_and_the_run_facts(runs, method):
    page = _page(runs[method])
    state, _, _ = _stored(runs[method])
    assert page.startswith("<!DOCTYPE html>")
    assert f"<title>coevo report: {method} on tsp_construct</title>" in page
    for title in SECTIONS:
        _section(page, title)
    facts = _section(page, "Run")
    for label, value in (
        ("method", method),
        ("budget (evaluations)", "16"),
        ("seed", "3"),
        ("status", "finished"),
        ("evaluations", str(state["evaluations"])),
    ):
        assert f"<td>{escape(label)}</td><td>{value}</td>" in facts
    expected_sha = state["weights_sha256"] or "none (no weights evolved)"
    assert expected_sha in facts


@pytest.mark.parametrize(("method", "images"), [("eoh", 2), ("coevo", 4)])
def test_plots_are_embedded_png_images_and_nothing_is_fetched(runs, method, images):
    page = _page(runs[method])
    sources = re.findall(r'<img alt="[^"]*" src="([^"]*)"', page)
    assert len(sources) == images  # objective + tokens; ES runs add the schedules and the rewards
    for source in sources:
        prefix, data = source.split(",", 1)
        assert prefix == "data:image/png;base64"
        assert base64.b64decode(data, validate=True).startswith(PNG_SIGNATURE)
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_prompt_only_run_says_it_has_no_es_updates(runs):
    assert "No ES update in this run (method eoh)" in _section(_page(runs["eoh"]), "ES schedules and rewards")
    assert "The prompts did not change in this run." in _page(runs["eoh"])
    assert "<h2>Episodes</h2>" not in _page(runs["eoh"]), "only a workload that plays episodes shows them"


@pytest.mark.parametrize("method", ["eoh", "coevo"])
def test_best_code_is_shown_escaped(runs, method):
    state, _, _ = _stored(runs[method])
    best = Candidate.from_dict(state["best"])
    assert f"<pre><code>{escape(best.code)}</code></pre>" in _section(_page(runs[method]), "Best heuristic")


@pytest.mark.parametrize("method", ["eoh", "coevo"])
def test_lineage_lists_the_best_and_every_stored_ancestor(runs, method):
    state, candidates, _ = _stored(runs[method])
    by_key = {c.key: c for c in reversed(candidates)}
    best = Candidate.from_dict(state["best"])
    assert best.parents, "the fixture run should evolve its best heuristic from parents"
    ancestry, frontier = set(), [best.key]
    while frontier:
        key = frontier.pop()
        if key in by_key and key not in ancestry:
            ancestry.add(key)
            frontier += by_key[key].parents
    rows = re.findall(
        r"<tr><td>(?:\u00a0)*(?:└ )?([0-9a-f]{16})[^<]*</td><td>(\w+)</td>",
        _section(_page(runs[method]), "Lineage of the best heuristic"),
    )
    assert rows[0] == (best.key, best.operator)
    assert {key for key, _ in rows} == ancestry
    assert all(by_key[key].operator == operator for key, operator in rows)


def test_lineage_walks_crossovers_and_lists_a_shared_ancestor_once():
    def made(code: str, operator: str, *parents: Candidate) -> Candidate:
        return Candidate(
            code=code,
            thought="",
            operator=operator,
            generation=len(parents),
            parents=tuple(p.key for p in parents),
            fitness=1.0,
        )

    root = made("root", "i1")
    left, right = made("left", "m1", root), made("right", "m2", root)
    child = made("child", "e1", left, right)
    unrelated = made("other", "i1")
    rows = lineage(child, [unrelated, root, left, right, child])
    assert [(depth, c.code, repeated) for depth, c, repeated in rows] == [
        (0, "child", False),
        (1, "left", False),
        (2, "root", False),
        (1, "right", False),
        (2, "root", True),
    ]


def test_prompt_rewrites_show_each_changed_component(runs):
    _, _, rewrites = _stored(runs["coevo"])
    assert rewrites, "the coevo fixture run should rewrite at least one prompt component"
    section = _section(_page(runs["coevo"]), "How the prompts changed")
    for variant in rewrites:
        text = variant["notes"] if variant["changed"] == "notes" else variant["templates"][variant["changed"]]
        assert f"<summary>{variant['id']}: rewrote {variant['changed']}</summary>" in section
        assert f"<p>after:</p><pre>{escape(text or '(empty)')}</pre>" in section


def test_validation_figures_appear_when_the_run_was_validated(runs, tmp_path):
    run_dir = shutil.copytree(runs["eoh"], tmp_path / "validated")
    result = {"valid": True, "objective": 6.5, "gap_pct": 4.25, "reason": None}
    data = {"split": "val", "best_key": None, "best": result, "seed": {**result, "gap_pct": 7.5}}
    store = RunStore.open(run_dir)
    store.set_meta("validation", json.dumps(data))
    store.close()
    page = write_report(run_dir).read_text(encoding="utf-8")
    for line in Validation.from_json(data).lines():
        assert f"<li>{escape(line)}</li>" in page
    assert "beats the seed by 3.250 percentage points" in page


def test_llm_markup_is_escaped_everywhere(tmp_path):
    run_dir = _run(tmp_path / "hostile", "coevo", HostileLLM())
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "<script" not in page
    assert page.count("</pre>") == page.count("<pre>")
    assert escape(HOSTILE) in _section(page, "Best heuristic")
    assert escape(HOSTILE) in _section(page, "How the prompts changed")


class EpisodeWorkload:
    """Plays each member for two turns on two instances; its reward is a pure function of its text."""

    name = "episodes"
    sense = "max"

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        return [self._one(member, traces) for member in members]

    def _one(self, member: Member, traces: bool) -> Evaluation:
        score = int(hashlib.sha256(member.text.encode()).hexdigest()[:4], 16) / 0xFFFF
        episodes = tuple(
            Trajectory(
                instance,
                (
                    Turn(f"board {instance}\n{HOSTILE}", "set 1 1 5", 0.0, 4),
                    Turn("one cell left", f"set 2 2 {score:.3f}", score + offset, 6),
                ),
                score + offset,
            )
            for instance, offset in (("easy", 0.5), ("hard", 0.0))
        )
        rewards = tuple(episode.reward for episode in episodes)
        return Evaluation("max", "search", rewards, sum(rewards) / 2, trajectories=episodes if traces else None)

    def remember(self, texts: Iterable[str]) -> None:
        pass

    def close(self) -> None:
        pass


def test_episodes_are_stored_and_the_best_median_and_worst_of_each_generation_shown(tmp_path):
    config = validate({**SMALL_RUN, "method": "sample+es", "settings": {"batch": 6}, "budget": 12})
    # The report asks the stored workload kind for its sections: this run's workload plays episodes.
    store = RunStore.create(tmp_path, {**config.model_dump(mode="json"), "workload": {"kind": "agent"}})
    with Runner(config, store, tmp_path, ScriptedLLM(), EpisodeWorkload()) as runner:
        runner.run()
    store = RunStore.open(tmp_path)
    stored, candidates = store.trajectories(), store.candidates()
    store.close()
    scored = [c for _, c in candidates if c.code]  # a rejected answer has no episodes
    assert len(stored) == 2 * len(scored) and {s.generation for s in stored} == {1, 2}
    first = stored[0].trajectory
    assert first.instance == "easy" and first.turns[0] == Turn(f"board easy\n{HOSTILE}", "set 1 1 5", 0.0, 4)
    assert [s.candidate for s in stored[::2]] == [c.key for c in scored]

    page = write_report(tmp_path).read_text(encoding="utf-8")
    episodes = _section(page, "Episodes")
    assert "<script" not in page and escape(HOSTILE) in episodes
    for generation in (1, 2):
        rewards = sorted((s.trajectory.reward for s in stored if s.generation == generation), reverse=True)
        shown = episodes.split(f"<h3>Generation {generation}</h3>")[1].split("<h3>")[0]
        assert f"best: reward {rewards[0]:.4g}" in shown
        assert f"median: reward {rewards[(len(rewards) - 1) // 2]:.4g}" in shown
        assert f"worst: reward {rewards[-1]:.4g}" in shown
        assert shown.count("<details>") == 3


def test_a_run_without_a_finished_step_still_gets_a_page(tmp_path):
    config = {"method": "coevo", "task": "tsp_construct", "model": "m", "budget": 4, "seed": 0}
    RunStore.create(tmp_path, config).close()
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "No candidate has been evaluated yet." in page
    assert "No valid heuristic yet." in page


def test_unreadable_run_dir_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="no run found"):
        write_report(tmp_path)


def test_page_renders_in_headless_chromium(runs, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium binary on PATH")
    report = runs["coevo"] / "report.html"
    flags = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--window-size=1200,3000"]
    dom = subprocess.run([*flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=60)
    assert "<title>coevo report: coevo on tsp_construct</title>" in dom.stdout
    assert dom.stdout.count("<img ") == 4
    screenshot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={screenshot}", report.as_uri()], capture_output=True, timeout=60)
    from PIL import Image

    with Image.open(screenshot) as image:
        assert image.size == (1200, 3000)
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 50  # text and plots drawn, not a blank page


def _figures(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """The report's figures by the y label of their first axes, caught instead of rendered."""
    caught: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, buffer, **kwargs: caught.append(figure))
    render_report(store)
    return {figure.axes[0].get_ylabel(): figure for figure in caught}


def test_the_invalid_strip_counts_the_members_whose_heuristic_was_invalid(runs, monkeypatch):
    store = RunStore.open(runs["coevo"])
    try:
        records, candidates = store.es_records(), [c for _, c in store.candidates()]
        figures = _figures(store, monkeypatch)
    finally:
        store.close()
    failed = [c for c in candidates if not c.valid and c.weights is not None and c.weights.seed is not None]
    assert failed, "the fixture run should have members that wrote invalid heuristics"
    assert all(r is not None for record in records for r in record.raw_rewards), "eoh+es tells them a penalty"
    counts = invalid_members(records, candidates)
    assert sum(counts) == len(failed)
    strip = figures["raw reward"].axes[1]
    assert [bar.get_height() for bar in strip.patches] == counts
    members = sum(len(record.raw_rewards) for record in records)
    assert f"{members} members over {len(records)} ES updates, {len(failed)} of them invalid" in _page(runs["coevo"])


def test_the_objective_plot_draws_the_seed_when_the_run_scored_it(tmp_path, monkeypatch):
    runner = start_run(validate({**SMALL_RUN, "method": "eoh", "library": "seed", "budget": 6}), tmp_path)
    runner.run()
    seed = next(c for _, c in runner.store.candidates() if c.operator == "library")
    figures = _figures(runner.store, monkeypatch)
    runner.store.close()
    (objective,) = [figure for label, figure in figures.items() if label.startswith("objective")]
    lines = {line.get_label(): list(line.get_ydata()) for line in objective.axes[0].get_lines()}
    assert lines["seed heuristic"] == [seed.objective, seed.objective]
    page = write_report(tmp_path).read_text()
    assert f"Dashed: the seed heuristic, objective {seed.objective:.6g} on search." in page


def test_the_objective_note_says_why_a_run_without_the_library_has_no_seed_line(runs):
    objective = _section(_page(runs["eoh"]), "Objective")
    assert "seed heuristic was not scored on the search split (library = none)" in objective


def test_the_lineage_explains_the_weights_notation(runs):
    lineage_section = _section(_page(runs["coevo"]), "Lineage of the best heuristic")
    label = re.search(r"<td>[^<@]+@\d+[+-][0-9a-f]{1,8}</td>", lineage_section)
    assert label, "the coevo fixture's best was written under a perturbation"
    assert "<code>model@N+s</code>" in lineage_section and "ES perturbation drawn from seed s" in lineage_section
