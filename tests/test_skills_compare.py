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
