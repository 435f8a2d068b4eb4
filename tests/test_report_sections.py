"""Report sections come from the plugins that own the artefacts: a method or workload from a user's file
adds its own sections to report.html (`report_sections`) without touching the report, each in its place."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from test_plugin_groups import LENGTHS

from coevo.run.config import validate
from coevo.run.report import write_report
from coevo.run.session import start_run
from coevo.run.store import RunStore

PLUGINS = (
    LENGTHS
    + '''
from collections import Counter

from coevo.methods.base import Method
from coevo.operators.eoh_operators import ProposalRequest
from coevo.run.report_html import table
from coevo.run.report_section import ReportSection


def operators_used(store, config, state):
    counts = Counter(c.operator for _, c in store.candidates())
    return table(sorted(counts.items()), ("operator", "candidates")) if counts else None


def lengths_seen(store, config, state):
    lengths = sorted({len(c.code) for _, c in store.candidates()})
    return f"<p>target {config['workload']['target']}; lengths {lengths[0]} to {lengths[-1]}</p>"


class OnlyFresh(Method):
    """A batch of i1 samples each step."""

    name = "only-fresh"
    phases = ("fresh",)
    report_sections = (
        *Method.report_sections,
        ReportSection("Operators used", operators_used),
        ReportSection("Never drawn", lambda store, config, state: None),
    )

    def generation_phase(self, context, phase):
        context.population.add(context.propose([ProposalRequest("i1")] * 3))


class ShownLengths(Lengths):
    report_sections = (ReportSection("Lengths", lengths_seen, place="plots"),)
'''
)
"""test_plugin_groups' `Lengths` workload, then a method and a subclass of `Lengths` that add sections."""


def _plugin_run(tmp_path: Path) -> tuple[Path, Path]:
    """A finished run of the file's method on the file's workload: (the plugin file, the run's directory)."""
    plugins = tmp_path / "plugins.py"
    plugins.write_text(PLUGINS)
    config = validate(
        {
            "task": "tsp_construct",
            "model": "scripted_llm:build",
            "budget": 7,
            "population_size": 2,
            "library": "none",
            "method": f"{plugins}:OnlyFresh",
            "workload": {"kind": f"{plugins}:ShownLengths", "target": 40},
        }
    )
    with start_run(config, tmp_path / "run") as runner:
        runner.run()
    return plugins, tmp_path / "run"


def _titles(page: str) -> list[str]:
    return re.findall(r"<section><h2>([^<]*)</h2>", page)


def test_a_plugin_methods_and_workloads_sections_show_in_their_places(tmp_path: Path) -> None:
    _, run_dir = _plugin_run(tmp_path)
    store = RunStore.open(run_dir)
    candidates = [c for _, c in store.candidates()]
    store.close()
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert _titles(page) == [
        "Run",
        "Objective",
        "ES schedules and rewards",
        "Lengths",  # the workload's plot, beside the run's plots
        "LLM tokens",
        "Best heuristic",
        "Lineage of the best heuristic",
        "How the prompts changed",  # what every method has, kept by the plugin's own tuple
        "Operators used",
    ], "a section that renders None is left out"
    ((operator, count),) = Counter(c.operator for c in candidates).items()
    assert f'<td>{operator}</td><td class="num">{count}</td>' in page
    lengths = sorted(len(c.code) for c in candidates)
    assert f"<p>target 40; lengths {lengths[0]} to {lengths[-1]}</p>" in page


def test_a_plugin_that_no_longer_loads_leaves_its_sections_out_and_says_why(tmp_path: Path) -> None:
    plugins, run_dir = _plugin_run(tmp_path)
    plugins.unlink()
    page = write_report(run_dir).read_text(encoding="utf-8")
    titles = _titles(page)
    assert "Operators used" not in titles and "Lengths" not in titles
    assert titles[0] == "Run" and titles[-1] == "Sections not shown"
    notes = re.findall(r'<p class="note">([^<]*); its sections are left out\.</p>', page)
    assert notes == [
        f"method &#x27;{plugins}:OnlyFresh&#x27;: file {plugins} not found",
        f"workload &#x27;{plugins}:ShownLengths&#x27;: file {plugins} not found",
    ]
