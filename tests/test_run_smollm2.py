"""The coevo method end to end on the real embedded SmolLM2-135M (slow: real generation on CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.run.config import validate
from coevo.run.runner import summary
from coevo.run.session import start_run
from coevo.run.store import RunStore

pytestmark = pytest.mark.slow


def test_coevo_on_smollm2_moves_weights_and_records_its_calls(tmp_path: Path) -> None:
    config = validate(
        {
            "method": "coevo",
            "task": "tsp_construct",
            "model": "smollm2-135m",
            "budget": 5,
            "seed": 0,
            "population_size": 2,
            "init_samples": 0,
            "es": {"rank": 2, "scope": "all_linear", "directions_per_parent": 2},
            "llm": {"max_new_tokens": 48},
            "eval": {"limit": 8},
            "settings": {"prompt_pool": 2, "operators": ["tune"], "components": ["notes"]},
        }
    )
    runner = start_run(config, tmp_path)
    base = runner.host.weights_sha256()
    runner.run()
    store = RunStore.open(tmp_path)
    facts = summary(store)
    assert facts["status"] == "finished" and facts["evaluations"] == 5
    assert facts["best"] is not None, "the library seed is always there"
    calls = store.llm_calls()
    members = [c for c in calls if c["operator"] == "tune"]
    assert len(members) == 4 and all(c["response"] for c in members)
    assert all('"seed": null' not in c["weights"] for c in members), "each member wrote under its own direction"
    children = [c for _, c in store.candidates() if c.operator == "tune"]
    assert any(c.valid for c in children), "SmolLM2 answers the tune prompt with usable numbers"
    records = store.es_records()
    assert len(records) == 1 and len(records[0].seeds) == 4
    if any(records[0].update.coeffs):  # zero only when every member earned the same reward
        assert facts["weights_sha256"] != base
