"""experiments/skills/compare.py: the summary's statistics on known runs, and a --quick run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "skills" / "compare.py"
sys.path.insert(0, str(SCRIPT.parent))

from compare import METHODS, NO_SKILL, summarise  # noqa: E402


def run(method: str, seed: int, after: float, before: float = 0.25) -> dict:
    return {"method": method, "seed": seed, "after": after, "before": before, "episodes": 10, "llm_calls": 20}


def test_summary_pairs_each_method_with_no_skill_and_coevo_by_seed():
    afters = {"skills": (0.5, 0.25), "es": (0.25, 0.5), "es-then-skills": (0.5, 0.5), "coevo": (0.75, 0.75)}
    runs = [run(m, seed, afters[m][seed]) for seed in (0, 1) for m in METHODS]
    summary = summarise(runs)
    arms = summary["arms"]
    assert list(arms) == [NO_SKILL, *METHODS]
    assert arms[NO_SKILL]["per_seed"] == [0.25, 0.25] and arms[NO_SKILL]["episodes"] == 0
    assert arms["coevo"]["mean"] == 0.75 and arms["coevo"]["std"] == 0.0
    assert arms["skills"]["std"] == pytest.approx(0.1767766953)
    assert arms["es"]["vs_no_skill"]["differences"] == [0.0, 0.25]
    assert arms["es"]["coevo_vs"]["differences"] == [0.5, 0.25]
    assert arms["es"]["coevo_vs"]["sentence"].startswith("better in 2 of 2 settings")
    assert summary["best"] == ["coevo"]


@pytest.mark.slow
def test_quick_comparison_runs_end_to_end_and_writes_table_json_and_plot(tmp_path: Path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", "--seeds", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert set(summary["arms"]) == {NO_SKILL, *METHODS}
    es = next(r for r in summary["runs"] if r["method"] == "es")
    assert es["episodes"] == 2 * 2 * 2, "population x generations x search episodes, held-out not counted"
    assert all(r["llm_calls"] >= r["episodes"] for r in summary["runs"]), "one turn at least per episode"
    assert (out / "compare.md").read_text().startswith("Held-out success on gridnav")
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture
def played(monkeypatch) -> list[tuple[str, int]]:
    """(method, seed) of every run `compare` starts, each faked as ending at 0.5 held-out success."""
    import compare

    started = []

    def fake_run(method, seed, settings, model, workdir, llm=None):
        started.append((method, seed))
        return run(method, seed, after=0.5)

    monkeypatch.setattr(compare, "one_run", fake_run)
    return started


def test_finished_runs_are_recorded_and_reused_and_other_settings_run_again(tmp_path: Path, played: list):
    import compare

    out = tmp_path / "out"
    assert compare.main(["--quick", "--seeds", "1", "--out", str(out)]) == 0
    assert played == [(m, 0) for m in METHODS]
    assert compare.main(["--quick", "--seeds", "2", "--out", str(out)]) == 0
    assert played[len(METHODS) :] == [(m, 1) for m in METHODS], "seed 0 came from its records"
    summary = json.loads((out / "compare.json").read_text())
    assert summary["settings"]["seeds"] == 2 and len(summary["runs"]) == 2 * len(METHODS)
    assert compare.main(["--quick", "--seeds", "1", "--model", "other", "--out", str(out)]) == 0
    assert played[2 * len(METHODS) :] == [(m, 0) for m in METHODS], "another model's runs are not reused"


def test_record_only_tables_the_complete_seeds_and_refuses_when_there_are_none(tmp_path: Path, monkeypatch, capsys):
    import compare

    monkeypatch.setattr(compare, "one_run", lambda method, seed, *a, **k: run(method, seed, after=0.25 * seed))
    out = tmp_path / "out"
    assert compare.main(["--quick", "--seeds", "1", "--out", str(out), "--record-only"]) == 2
    assert "no seed has all" in capsys.readouterr().err
    assert compare.main(["--quick", "--seeds", "2", "--out", str(out)]) == 0
    (out / "records" / "coevo__s1.json").unlink()  # seed 1 now lacks a method
    assert compare.main(["--quick", "--seeds", "2", "--out", str(out), "--record-only"]) == 0
    summary = json.loads((out / "compare.json").read_text())
    assert summary["settings"]["seeds"] == 1 and {r["seed"] for r in summary["runs"]} == {0}


def test_seed_option_runs_only_that_seed_and_tables_every_complete_one(tmp_path: Path, played: list):
    import compare

    out = tmp_path / "out"
    assert compare.main(["--quick", "--seeds", "3", "--seed", "2", "--out", str(out)]) == 0
    assert played == [(m, 2) for m in METHODS]
    assert {r["seed"] for r in json.loads((out / "compare.json").read_text())["runs"]} == {2}
    assert compare.main(["--quick", "--seeds", "3", "--seed", "0", "--out", str(out)]) == 0
    assert played[len(METHODS) :] == [(m, 0) for m in METHODS]
    summary = json.loads((out / "compare.json").read_text())
    assert {r["seed"] for r in summary["runs"]} == {0, 2}
