"""The runner and the five methods, driven by the scripted LLM (fast, deterministic, weight-sensitive)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM

from coevo.es.schedules import cosine
from coevo.es.update_log import replay
from coevo.methods.base import improvement_reward
from coevo.run.config import ConfigError, RunConfig, load_config, validate
from coevo.run.runner import summary
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore

BASE = {
    "task": "tsp_construct",
    "model": "scripted_llm:build",
    "budget": 26,
    "seed": 3,
    "population_size": 4,
    "eval": {"limit": 4, "workers": 1},
    "es": {"sigma": 0.05, "alpha": 0.05},
}


def config(method: str, **changes) -> RunConfig:
    """BASE for `method`; the sample methods write batches of 6."""
    settings = {"batch": 6} if method.startswith("sample") else {}
    return validate({**BASE, "settings": settings, **changes, "method": method})


@pytest.mark.parametrize("method", ["sample", "eoh", "sample+es", "eoh+es", "coevo"])
def test_every_method_spends_its_budget_and_records_everything(tmp_path: Path, method: str) -> None:
    runner = start_run(config(method), tmp_path)
    best = runner.run()
    store = RunStore.open(tmp_path)
    facts = summary(store)
    candidates = store.candidates()

    assert facts["status"] == "finished" and facts["evaluations"] == 26
    assert len(candidates) == 26  # one library heuristic plus 25 proposals: each slot recorded once
    assert candidates[0][1].operator == "library"
    assert facts["llm_calls"] >= 25
    valid = [c for _, c in candidates if c.valid]
    assert best is not None and best.fitness == max(c.fitness for c in valid)
    assert facts["best"]["code"] == best.code
    assert len(runner.population) <= 4
    invalid = [c for _, c in candidates if not c.valid]
    assert invalid and all(c.reason for c in invalid), "the scripted LLM writes some broken code"
    proposals = [c for _, c in candidates if c.operator != "library"]
    assert all(c.weights is not None and c.weights.base == "scripted_llm:build" for c in proposals)
    if runner.config.uses_weights:
        records = store.es_records()
        assert records and [r.step for r in records] == list(range(len(records)))
        assert facts["weights_sha256"] == runner.host.weights_sha256()
        perturbed = [c for c in proposals if c.weights.seed is not None]
        assert perturbed, "ES methods write children under perturbed weights"
        assert (tmp_path / "es_history.jsonl").read_text().count("\n") == len(records)
    else:
        assert store.es_records() == [] and facts["weights_sha256"] is None


def test_es_updates_change_the_weights_and_follow_the_cosine_schedule_over_the_budget(tmp_path: Path) -> None:
    """5 planned updates of 6 members after the library heuristic: step i reads the cosine at the share
    of the budget spent when it asks, (1 + 6 i) / 31."""
    runner = start_run(config("sample+es", budget=31), tmp_path)
    before = runner.host.weights_sha256()
    runner.run()
    records = RunStore.open(tmp_path).es_records()
    assert len(records) == 5 and all(len(r.seeds) == 6 for r in records)
    assert runner.host.weights_sha256() != before
    schedule = cosine(0.05, 0.0, total_steps=5)
    assert [r.sigma for r in records] == pytest.approx([schedule(5 * (1 + 6 * i) / 31) for i in range(5)])


def test_eoh_es_decays_sigma_over_the_budget_whatever_its_generations_cost(tmp_path: Path) -> None:
    """The planned update count assumes whole generations, so this run makes fewer updates than planned:
    its sigma still falls towards the floor by the end of the budget, and every step has a direction."""
    runner = start_run(config("eoh+es", budget=40), tmp_path)
    runner.run()
    records = RunStore.open(tmp_path).es_records()
    sigmas = [r.sigma for r in records]
    assert len(records) < runner.method.planned_updates()
    assert sigmas == sorted(sigmas, reverse=True) and 0.0 < sigmas[-1] < 0.05 / 4
    assert all(r.update is not None for r in records)


def test_coevo_evolves_prompt_variants_and_records_them(tmp_path: Path) -> None:
    runner = start_run(config("coevo", budget=40, settings={"prompt_pool": 2, "components": ["m2", "notes"]}), tmp_path)
    runner.run()
    store = RunStore.open(tmp_path)
    prompts = store.prompts()
    assert prompts, "the rewriter's accepted variants are stored"
    assert {p["changed"] for p in prompts} <= {"m2", "notes"}
    assert all(p["parent"] for p in prompts)
    operators = {call["operator"] for call in store.llm_calls()}
    assert any(op.startswith("rewrite:") or op == "reflect_short" for op in operators)
    used = {c.prompt_id for _, c in store.candidates() if c.prompt_id}
    assert len(used) >= 2, "members are spread over more than one prompt variant"


def test_lowrank_members_generate_in_one_batch(tmp_path: Path) -> None:
    runner = start_run(config("eoh+es", es={"sigma": 0.05, "alpha": 0.05, "rank": 1, "scope": "all_linear"}), tmp_path)
    before = runner.host.weights_sha256()
    runner.run()
    assert type(runner.host).__name__ == "LowRankHost"
    assert runner.host.weights_sha256() != before
    fresh = ScriptedLLM().model  # the history alone rebuilds the low-rank run's weights, as `coevo serve` does
    assert replay(fresh, RunStore.open(tmp_path).es_records()).weights_sha256() == runner.host.weights_sha256()


class SeedRecorder(ScriptedLLM):
    """The scripted LLM, noting the seed each request is sampled with."""

    def __init__(self) -> None:
        super().__init__()
        self.seeds: list[int | None] = []

    def generate(self, requests, sampling):
        self.seeds += [sampling.seed_for(index) for index in range(len(requests))]
        return super().generate(requests, sampling)


def test_a_members_sampling_does_not_depend_on_how_members_are_batched(tmp_path: Path) -> None:
    lowrank = {"sigma": 0.05, "alpha": 0.05, "rank": 1, "scope": "all_linear"}
    answers, seeds = [], []
    for batch in (1, 2, 6):  # six members a generation: one per call, in chunks of two, all at once
        llm = SeedRecorder()
        run_config = config("sample+es", budget=13, es=lowrank, llm={"max_batch_size": batch})
        with start_run(run_config, tmp_path / str(batch), llm) as run:
            run.run()
            answers.append([(c["step"], c["weights"], c["response"]) for c in run.store.llm_calls()])
        seeds.append(llm.seeds)
    assert len(answers[0]) == 12 and len({response for *_, response in answers[0]}) > 1
    assert answers[0] == answers[1] == answers[2]
    full_rank = SeedRecorder()  # one member at a time under perturbed(): member i keeps its seed
    with start_run(config("sample+es", budget=13), tmp_path / "full", full_rank) as run:
        run.run()
    assert seeds[0] == seeds[1] == seeds[2] == full_rank.seeds
    # the two members of a mirrored pair sample one stream (common random numbers); pairs differ
    assert seeds[0][::2] == seeds[0][1::2] and len(set(seeds[0])) == 6


def test_resume_in_process_continues_from_the_last_step(tmp_path: Path) -> None:
    straight = start_run(config("eoh+es"), tmp_path / "a")
    straight.run()
    interrupted = start_run(config("eoh+es"), tmp_path / "b")
    for _ in range(3):
        interrupted.run_step()
    interrupted.store.close()
    resumed = resume_run(tmp_path / "b")
    assert resumed.step == 3 and resumed.engine.step == interrupted.engine.step
    resumed.run()
    assert resumed.host.weights_sha256() == straight.host.weights_sha256()
    assert resumed.best == straight.best


def test_improvement_reward_follows_the_reference() -> None:
    # fitness is higher-is-better: the reference's objectives 5, 4, 6, ... negated
    assert improvement_reward(parent=-5.0, child=-4.0, worst=-6.0) == 1.0
    assert improvement_reward(parent=-5.0, child=None, worst=-6.0) == -1.0  # C_eff = max(W, P - 1) = -6
    assert improvement_reward(parent=-5.0, child=-9.0, worst=-5.5) == pytest.approx(-0.5)  # worse than W
    assert improvement_reward(parent=-5.0, child=-5.8, worst=-6.0) == pytest.approx(-0.8)


def test_overrides_reach_nested_keys_and_parse_values(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('method = "eoh"\ntask = "kp_construct"\nbudget = 100\n')
    loaded = load_config(path, ["budget=40", "seed=3", "es.sigma=0.002", "llm.api_base=http://127.0.0.1:9/v1"])
    assert (loaded.budget, loaded.seed, loaded.es.sigma, loaded.llm.api_base) == (40, 3, 0.002, "http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["bogus=1"], "unknown config key 'bogus'"),
        (["method=annealing"], "config key 'method'"),
        (["task=chess"], "unknown task 'chess'"),
        (["budget=0"], "config key 'budget'"),
        (["method=eoh+es", "llm.api_base=http://127.0.0.1:9/v1"], "prompt-only"),
        (["method=coevo", "es.rank=2"], "es.scope"),
        (["es=3"], "config key 'es'"),
        (["budget.x=1"], "'budget' is not a section"),
    ],
)
def test_bad_configs_fail_with_one_line(tmp_path: Path, overrides: list[str], message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text('method = "eoh"\ntask = "tsp_construct"\nbudget = 10\n[es]\nsigma = 0.001\n')
    with pytest.raises(ConfigError) as error:
        load_config(path, overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_coevo_with_tune_retunes_the_seed_parameters(tmp_path: Path) -> None:
    runner = start_run(config("coevo", budget=17, init_samples=0, settings={"operators": ["tune"]}), tmp_path)
    runner.run()
    children = [c for _, c in RunStore.open(tmp_path).candidates() if c.operator == "tune"]
    assert len(children) == 16 and all(c.parents for c in children)
    seed = runner.task.seed_code()
    valid = [c for c in children if c.valid]
    assert valid and all(c.code != seed and len(c.code.splitlines()) == len(seed.splitlines()) for c in valid)


def test_library_all_adds_exported_heuristics_of_the_task(tmp_path: Path, monkeypatch) -> None:
    from coevo.run import starting_heuristics as library
    from tasks import get_task

    monkeypatch.setattr(library, "EVOLVED_DIR", tmp_path)
    (tmp_path / "tsp_construct__mine.py").write_text("def select_next_node(c, d, u, m):\n    return min(u)\n")
    (tmp_path / "kp_construct__other.py").write_text("x = 1\n")
    task = get_task("tsp_construct")
    assert library.starting_heuristics(task, "none") == {}
    assert list(library.starting_heuristics(task, "seed")) == ["seed"]
    codes = library.starting_heuristics(task, "all")
    assert list(codes) == ["seed", "mine"] and "min(u)" in codes["mine"]


def test_a_copy_of_a_known_heuristic_skips_the_sandbox_and_takes_its_verdict(tmp_path: Path) -> None:
    from coevo.operators.fingerprint import code_fingerprint

    runner = start_run(config("sample", library="none", budget=10), tmp_path)
    seed = runner.task.seed_code()
    copy = "# a cosmetic copy of the seed\n" + seed.replace("current_node", "here")
    assert copy != seed and code_fingerprint(copy) == code_fingerprint(seed)
    runs = []
    sandbox_run = runner.evaluator._sandbox.run
    runner.evaluator._sandbox.run = lambda code, limits: runs.append(code) or sandbox_run(code, limits)
    original, duplicate = runner.add_library({"seed": seed, "copy": copy})
    assert runs == [seed], "the copy never reaches the sandbox"
    assert duplicate.valid and duplicate.objective == original.objective and duplicate.code == copy
    assert runner.evaluations == 2, "a duplicate is charged one evaluation, as every slot is"
    runner.run_step()
    runner.store.close()

    resumed = resume_run(tmp_path)  # the known heuristics come back from the store
    resumed.evaluator._sandbox.run = lambda code, limits: runs.append(code) or sandbox_run(code, limits)
    [again] = resumed.add_library({"again": copy.replace("here", "there")})
    assert runs == [seed] and again.objective == original.objective
    resumed.close()


def test_coevo_folds_new_hints_into_a_variants_notes_with_the_long_reflection(tmp_path: Path) -> None:
    runner = start_run(config("coevo", budget=60, settings={"prompt_pool": 2, "components": ["notes"]}), tmp_path)
    runner.run()
    store = RunStore.open(tmp_path)
    variants = {p["id"]: p for p in store.prompts()}
    longs = [call for call in store.llm_calls() if call["operator"] == "reflect_long"]
    assert longs, "a variant that already has notes gets them merged, not replaced"
    folded = [v for v in variants.values() if v["parent"] in variants and variants[v["parent"]]["notes"]]
    assert folded
    for variant in folded:
        previous = variants[variant["parent"]]["notes"]
        assert any(previous in json.loads(call["prompt"])[-1]["content"] for call in longs)


def test_validation_uses_the_runs_eval_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.evaluate import evaluator as evaluator_module
    from coevo.run.validation import validate_best

    built = []
    real_init = evaluator_module.Evaluator.__init__

    def recording_init(self, *args, **kwargs) -> None:
        real_init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(evaluator_module.Evaluator, "__init__", recording_init)
    runner = start_run(config("sample", budget=7, eval={"limit": 3, "workers": 1}), tmp_path)
    runner.run()
    validation = validate_best(runner)
    runner.close()
    validator = built[-1]
    assert validator.split == "val" and validator.workers == 1
    assert validation.seed["n_instances"] == 3 and validation.best["n_instances"] == 3
