"""Model ensembles: the asymmetric UCB bandit, the router, runs with two models (one always better),
their records, exact resume, ES members pinned to the local model, and the config's one-line errors."""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from ensemble_llms import SteppingLLM
from test_runner import BASE as RUNNER_BASE
from test_workload import CoefficientWorkload

from coevo.llm.bandit import Pull, reward, scores, shares
from coevo.llm.base import Completion, Message, SamplingParams
from coevo.llm.ensemble import EnsembleLLM
from coevo.run.config import ConfigError, validate
from coevo.run.model_choice import pulls
from coevo.run.report import render_report
from coevo.run.runner import Runner
from coevo.run.session import resume_run, start_run
from coevo.run.store import DB_NAME, RunStore

BETTER, WORSE = "ensemble_llms:better", "ensemble_llms:worse"


# --- the bandit ------------------------------------------------------------------------------------
def test_arms_never_pulled_go_first_in_their_order() -> None:
    assert shares(["a", "b", "c"], [], 3, exploration=1.0) == {"a": 1, "b": 1, "c": 1}
    pulled = [Pull("a", 5.0, 1.0), Pull("b", 5.0, 1.0)]
    assert shares(["a", "b", "c"], pulled, 1, exploration=0.0) == {"a": 0, "b": 0, "c": 1}


def test_the_score_is_the_mean_scaled_reward_plus_the_ucb1_bonus() -> None:
    evidence = [Pull("a", 2.0, 10.0), Pull("a", -1.0, 10.0), *[Pull("b", 1.0, 10.0)] * 3]
    got = scores(["a", "b"], evidence, {}, exploration=0.5)
    # rewards 0.2, 0 | 0.1 x 3, scaled by the largest (0.2): means 0.5 and 0.5 over 5 pulls
    assert got["a"] == pytest.approx(0.5 + 0.5 * math.sqrt(2 * math.log(5) / 2))
    assert got["b"] == pytest.approx(0.5 + 0.5 * math.sqrt(2 * math.log(5) / 3))
    assert shares(["a", "b"], evidence, 1, exploration=0.5) == {"a": 1, "b": 0}, "equal means: the less pulled"
    steady = [Pull("a", 1.0, 10.0), Pull("a", 1.0, 10.0), Pull("b", 1.0, 10.0), Pull("b", 0.0, 10.0)]
    assert shares(["a", "b"], steady, 1, exploration=0.0) == {"a": 1, "b": 0}, "no exploration: the best mean"


def test_one_calls_requests_spread_as_their_pending_pulls_shrink_the_bonus() -> None:
    evidence = [Pull("a", 1.0, 1.0), Pull("b", 0.5, 1.0)] * 5
    allotted = shares(["a", "b"], evidence, 20, exploration=1.0)
    assert allotted["a"] > allotted["b"] > 0 and sum(allotted.values()) == 20


def test_losses_are_clipped_so_rare_big_gains_beat_steady_small_ones() -> None:
    assert reward(Pull("a", -100.0, 10.0)) == 0.0 and reward(Pull("a", None, 10.0)) == 0.0
    assert reward(Pull("a", 3.0, 10.0)) == pytest.approx(0.3)
    bold = [Pull("bold", 10.0, 10.0), *[Pull("bold", -100.0, 10.0)] * 3]
    steady = [Pull("steady", 0.1, 10.0)] * 4
    # a symmetric reward would give bold a mean of -72.5 and steady 0.01
    assert shares(["steady", "bold"], bold + steady, 1, exploration=0.0) == {"steady": 0, "bold": 1}


def test_improvement_per_token_favours_the_model_that_gains_as_much_with_fewer_tokens() -> None:
    evidence = [Pull("verbose", 1.0, 400.0), Pull("terse", 1.0, 100.0)] * 3
    assert shares(["verbose", "terse"], evidence, 1, exploration=0.0) == {"verbose": 0, "terse": 1}


# --- the router ------------------------------------------------------------------------------------
class SeedEcho:
    """Answers each request with the seed it was sampled under."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        self.calls += 1
        return [Completion(str(sampling.seed_for(i)), 1, 1, 0.0, "stop") for i in range(len(requests))]


def test_the_router_answers_each_request_on_its_own_stream_and_names_the_model() -> None:
    sampling = SamplingParams(seed=7, first_request=3)
    alone = SeedEcho("alone").generate([[]] * 5, sampling)
    models = {"a": SeedEcho("a"), "b": SeedEcho("b")}
    routed = EnsembleLLM(models, lambda: [Pull("a", 1.0, 1.0), Pull("b", 1.0, 1.0)], 1.0).generate([[]] * 5, sampling)
    assert [c.text for c in routed] == [c.text for c in alone], "a request's seed does not depend on its model"
    assert [c.model for c in routed] == ["a"] * 3 + ["b"] * 2
    assert models["a"].calls == models["b"].calls == 1, "one call per model, its requests together"


# --- runs ------------------------------------------------------------------------------------------
def coefficient_run(tmp_path: Path, local: str, other: str, **llm) -> RunStore:
    """An eoh run of `local` (the run's model) and `other` on a workload scoring the coefficient."""
    config = validate(
        {
            "method": "eoh",
            "task": "tsp_construct",
            "model": local,
            "budget": 50,
            "population_size": 4,
            "library": "none",
            "llm": {"ensemble": [{"model": other, "name": "other"}], **llm},
        }
    )
    store = RunStore.create(tmp_path, config.model_dump(mode="json"))
    step = 0.25 if local == BETTER else -0.25
    with Runner(config, store, tmp_path, SteppingLLM(local, step), workload=CoefficientWorkload("max")) as runner:
        runner.run()
    return RunStore.open(tmp_path)


@pytest.mark.parametrize(("local", "other"), [(WORSE, BETTER), (BETTER, WORSE)])
def test_the_model_that_always_improves_is_chosen_more_and_every_call_names_its_model(
    tmp_path: Path, local: str, other: str
) -> None:
    store = coefficient_run(tmp_path, local, other)
    names = {local: local, other: "other"}
    calls = store.llm_calls()
    assert all(call["model"] in names.values() for call in calls), "every call names its model"
    with_parents = Counter(call["model"] for call in calls if call["operator"] != "i1")
    better, worse = with_parents[names[BETTER]], with_parents[names[WORSE]]
    assert better > 3 * worse and worse >= 1, with_parents
    evidence = pulls(store)
    assert all(p.improvement < 0 for p in evidence if p.arm == names[WORSE])
    assert all(p.improvement > 0 for p in evidence if p.arm == names[BETTER])
    written_under = Counter(child.weights.base for _, child in store.candidates())
    assert written_under == Counter(call["model"] for call in calls), "a child's weights are its model's"
    usage = store.model_usage()
    assert sum(used["calls"] for used in usage.values()) == len(calls)
    page = render_report(store)
    assert "<h2>Models of the ensemble</h2>" in page
    row = re.search(rf"<td>{re.escape(names[BETTER])}</td><td class=\"num\">(\d+)</td>", page)
    assert row is not None and int(row.group(1)) == usage[names[BETTER]]["calls"]
    store.close()


def test_priced_models_are_rewarded_per_cost(tmp_path: Path) -> None:
    counts = []
    for priced, costs in (("unpriced", {}), ("priced", {"cost_per_completion_token": 1.0})):
        config = validate(
            {
                "method": "eoh",
                "task": "tsp_construct",
                "model": "ensemble_llms:better",
                "budget": 50,
                "population_size": 4,
                "library": "none",
                "llm": {
                    **costs,
                    "ensemble": [{"model": "ensemble_llms:better", "name": "dear"} | {k: 20.0 for k in costs}],
                },
            }
        )
        store = RunStore.create(tmp_path / priced, config.model_dump(mode="json"))
        llm = SteppingLLM("better", 0.25)
        with Runner(config, store, tmp_path / priced, llm, workload=CoefficientWorkload("max")) as runner:
            runner.run()
            counts.append(Counter(call["model"] for call in runner.store.llm_calls() if call["operator"] != "i1"))
    unpriced, priced_counts = counts
    assert abs(unpriced["dear"] - unpriced["ensemble_llms:better"]) <= 4, "equal models share the calls"
    assert priced_counts["ensemble_llms:better"] > 3 * priced_counts["dear"], priced_counts


def test_a_run_of_one_model_names_none(tmp_path: Path) -> None:
    config = validate({**RUNNER_BASE, "method": "eoh", "budget": 10})
    with start_run(config, tmp_path) as run:
        run.run()
        assert all(call["model"] is None for call in run.store.llm_calls())
        assert run.store.model_usage() == {} and run.writer is run.llm
        assert "Models of the ensemble" not in render_report(run.store)


ES_ENSEMBLE = {
    **RUNNER_BASE,
    "method": "eoh+es",
    "budget": 34,
    "llm": {"ensemble": [{"model": BETTER}]},
}


def test_es_members_write_with_the_local_model_and_a_resumed_run_chooses_as_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    config = validate(ES_ENSEMBLE)
    with start_run(config, tmp_path / "straight") as straight:
        straight.run()
        expected = straight.store.last_state()
        expected_calls = straight.store.llm_calls()
        children = straight.store.candidates()
    members = [call for call in expected_calls if call["weights"] and '"seed": null' not in call["weights"]]
    assert members and all(call["model"] == "scripted_llm:build" for call in members), "ES members are pinned"
    routed = Counter(call["model"] for call in expected_calls if call["operator"] in ("e1", "e2"))
    assert routed[BETTER] > 0 and routed["scripted_llm:build"] > 0, routed
    assert all(c.weights.seed is None for _, c in children if c.weights and c.weights.base == BETTER)

    with start_run(config, tmp_path / "resumed") as interrupted:
        while interrupted.step < 3:
            interrupted.run_step()
    with resume_run(tmp_path / "resumed") as resumed:
        assert resumed.step == 3
        resumed.run()
        actual, actual_calls = resumed.store.last_state(), resumed.store.llm_calls()
    assert [(c["operator"], c["model"], c["response"]) for c in actual_calls] == [
        (c["operator"], c["model"], c["response"]) for c in expected_calls
    ]
    assert actual["best"] == expected["best"] and actual["weights_sha256"] == expected["weights_sha256"]


def test_an_older_store_gains_the_model_column_on_open(tmp_path: Path) -> None:
    RunStore.create(tmp_path, {"method": "eoh"}).close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("ALTER TABLE llm_calls DROP COLUMN model")
    store = RunStore.open(tmp_path)
    assert store.model_usage() == {}
    store.close()


# --- config ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"llm": {"ensemble": [{"model": "scripted_llm:build"}]}}, "two models are called 'scripted_llm:build'"),
        ({"llm": {"ensemble": [{"name": "x"}]}}, "config key 'llm.ensemble.0.model' is required"),
        ({"llm": {"cost_per_completion_token": 1.0}}, "[[llm.ensemble]] names none"),
        (
            {"llm": {"ensemble": [{"model": BETTER, "cost_per_completion_token": 1.0}]}},
            "set cost_per_completion_token on every model",
        ),
        ({"llm": {"ensemble": [{"model": BETTER, "cost_per_prompt_token": 1.0}]}}, "needs cost_per_completion_token"),
        ({"llm": {"ensemble": [{"model": BETTER, "backend": "nonesuch"}]}}, "unknown backend 'nonesuch'"),
        ({"llm": {"ensemble": [{"model": "m", "engine_options": {"a": 1}}]}}, "llm.ensemble[0] (m): "),
        (
            {"method": "eoh+es", "llm": {"api_base": "http://127.0.0.1:9/v1", "ensemble": [{"model": BETTER}]}},
            "perturbs the run's own model, and llm.api_base makes it a prompt-only server",
        ),
        (
            {
                "method": "es",
                "task": None,
                "workload": {"kind": "agent", "env": "gridnav"},
                "llm": {"ensemble": [{"model": BETTER}]},
            },
            "the agent workload has none",
        ),
    ],
)
def test_bad_ensemble_configs_fail_with_one_line(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        validate({**RUNNER_BASE, "method": "eoh", **changes})
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_server_beside_a_local_model_is_fine_for_es(tmp_path: Path) -> None:
    config = validate(
        {
            **RUNNER_BASE,
            "method": "eoh+es",
            "llm": {"ensemble": [{"model": "gpt", "api_base": "http://127.0.0.1:9/v1"}]},
        }
    )
    assert [entry.backend for entry in config.llm.ensemble] == ["openai"]
