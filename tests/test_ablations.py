"""experiments/ablations.py: each ablation's two arms run as grids on the same tasks and seeds, paired
by seed, with Holm's correction over all comparisons."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import ablations  # noqa: E402

from coevo.run.store import RunStore  # noqa: E402
from coevo.stats import holm  # noqa: E402


@pytest.fixture(scope="module")
def tiny_ablations(tmp_path_factory) -> tuple[Path, Path, dict]:
    out = tmp_path_factory.mktemp("ablations")
    results = out / "results.json"
    results.write_text(json.dumps({"other": 1}))
    argv = ["--tasks", "tsp_construct", "--budget", "12", "--seeds", "0", "1", "--scale", "1"]
    argv += ["--model", "scripted_llm:build", "--eval-limit", "2", "--out", str(out), "--results", str(results)]
    argv += ["--set", "population_size=4", "--set", 'novelty.embedder="fake_embedder:TrigramEmbedder"']
    assert ablations.main(argv) == 0
    return out, results, json.loads((out / "ablations.json").read_text())


def test_each_arm_runs_with_its_own_settings(tiny_ablations) -> None:
    out, _, _ = tiny_ablations
    for ablation, arms in ablations.ABLATIONS.items():
        for arm in ("control", "treatment"):
            for seed in (0, 1):
                store = RunStore.open(out / ablation / arm / "runs" / "tsp_construct" / "eoh" / f"b12-s{seed}")
                try:
                    config = store.config
                finally:
                    store.close()
                assert config["seed"] == seed and config["population_size"] == 4
                for assignment in arms[arm]:
                    section, rest = assignment.split(".", 1)
                    key, value = rest.split("=", 1)
                    assert config[section][key] == json.loads(value)


def test_the_arms_are_paired_by_seed_and_corrected_together(tiny_ablations) -> None:
    out, results, record = tiny_ablations
    rows = record["comparisons"]
    assert [r["ablation"] for r in rows] == ["diff", "islands", "novelty"] and {r["task"] for r in rows} == {
        "tsp_construct"
    }
    for row in rows:
        assert row["seeds"] == [0, 1] and row["wins"] + row["ties"] + row["losses"] == 2
    assert [r["p_holm"] for r in rows] == list(holm({str(i): r["p"] for i, r in enumerate(rows)}).values())
    evidence = json.loads(results.read_text())
    assert evidence["other"] == 1 and evidence["search_ablations"] == record
    assert "| diff | tsp_construct | 2 |" in (out / "ablations.md").read_text()


def test_a_second_call_resumes_instead_of_running_again(tiny_ablations) -> None:
    out, _, record = tiny_ablations
    argv = ["--tasks", "tsp_construct", "--budget", "12", "--seeds", "0", "1", "--model", "scripted_llm:build"]
    argv += ["--eval-limit", "2", "--out", str(out), "--set", "population_size=4"]
    argv += ["--set", 'novelty.embedder="fake_embedder:TrigramEmbedder"']
    assert ablations.main(argv) == 0
    for grid in out.glob("*/*/grid.json"):
        assert {run["outcome"] for run in json.loads(grid.read_text())["runs"]} == {"skipped"}
    assert json.loads((out / "ablations.json").read_text())["comparisons"] == record["comparisons"]
