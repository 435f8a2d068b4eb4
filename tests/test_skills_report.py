"""The skill library in report.html and in the held-out lines: its history, credit, and the library measured."""

from __future__ import annotations

from pathlib import Path

from coevo.run.heldout import heldout_lines
from coevo.run.report import write_report
from coevo.run.session import start_run
from coevo.run.store import RunStore
from coevo.skills.timeline import library_history
from test_skill_credit import config_with_library
from test_skills_methods import FakeAgentLLM


def test_report_shows_the_library_history_and_the_library_held_out_success_was_measured_with(tmp_path: Path):
    config = config_with_library(tmp_path, [("stand-still", "a lesson", "Look around first.")])
    with start_run(config, tmp_path / "run", FakeAgentLLM()) as runner:
        runner.run()
        runner.record_heldout("after")
        final = runner.method.skills.library
        lines = heldout_lines(runner.heldout)
    assert "walk-to-goal" in final, "the scripted lesson is learned in generation 1"
    assert lines[0].startswith("base (0 ES updates, library ") and "(stand-still)" in lines[0]
    assert f"library {final.hash[:12]} (stand-still, walk-to-goal)" in lines[1]
    assert lines[2].startswith("the run (") and "ES updates and the skill library) changed held-out success by" in lines[2]

    store = RunStore.open(tmp_path / "run")
    history = library_history(store.states())
    store.close()
    assert [at.generation for at in history] == [0, 1, 2]
    assert history[0].added == ("stand-still",) and history[1].added == ("walk-to-goal",)
    assert [e.op for e in history[1].edits] == ["add"] and not history[2].edits
    page = write_report(tmp_path / "run").read_text()
    section = page.split("<h2>Skill library</h2>", 1)[1].split("</section>", 1)[0]
    assert "walk-to-goal" in section and "add: add text skill &#x27;walk-to-goal&#x27;" in section
    assert f"library {final.hash[:12]} (stand-still, walk-to-goal)" in section
    credit = final["walk-to-goal"].meta.credit
    assert credit is not None and f"{credit:+.3g} ({final['walk-to-goal'].meta.uses} uses)" in section
