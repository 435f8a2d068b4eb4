"""The learnability experiment's machinery (experiments/evidence/learnability.py) on a tiny model: items that
keep held-out questions out of training, option scores equal to one unbatched row each, a training run that
resumes where it stopped, and a held-out record whose primary tests are Holm-corrected together."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_lm import build_tiny_llama, build_tiny_tokenizer

from coevo.llm.hf import HFBackend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "evidence"))
import learnability  # noqa: E402

TASK = "multiply_mixed"


def tiny_backend() -> HFBackend:
    """A tiny model whose word-level vocabulary holds every question word and number of the task's items."""
    items = learnability.heldout_items(TASK) + [
        item for generation in range(1, 6) for item in learnability.training_items(TASK, generation, 4)
    ]
    corpus = [item.question.replace("?", " ?") for item in items] + [" ".join(item.options) for item in items]
    tokenizer = build_tiny_tokenizer(corpus)
    torch.set_grad_enabled(False)
    return HFBackend(build_tiny_llama(len(tokenizer)), tokenizer, name="tiny")


@pytest.fixture
def tiny(monkeypatch) -> None:
    monkeypatch.setattr(learnability, "load", lambda model: tiny_backend())


def test_held_out_questions_are_distinct_and_never_asked_in_training():
    heldout = {item.question for item in learnability.heldout_items(TASK)}
    assert len(heldout) == learnability.HELDOUT_ITEMS
    for generation in (1, 2, 50):
        batch = learnability.training_items(TASK, generation, 16)
        assert len({item.question for item in batch}) == 16 and not heldout & {item.question for item in batch}
    assert learnability.training_items(TASK, 3, 16) == learnability.training_items(TASK, 3, 16), "seeded"
    with pytest.raises(ValueError, match="fewer than 400 questions"):
        learnability.heldout_items("multiply_small")  # 64 facts


def test_option_scores_equal_each_option_scored_alone():
    backend = tiny_backend()
    scorer = learnability.Scorer(backend, chunk=3)
    batch = learnability.heldout_items(TASK)[:5] + learnability.heldout_items("larger")[:2]
    for item, scores in zip(batch, scorer.option_logprobs(batch), strict=True):
        prompt = scorer.prompt_ids(item)
        alone = []
        for option in item.options:
            answer = backend.tokenizer(option, add_special_tokens=False)["input_ids"]
            logp = backend.model(input_ids=torch.tensor([prompt + answer])).logits.float().log_softmax(-1)[0]
            alone.append(sum(float(logp[len(prompt) + k - 1, token]) for k, token in enumerate(answer)))
        assert scores == pytest.approx(alone, abs=1e-4)


def test_training_resumes_where_it_stopped_and_refuses_other_settings(tiny, tmp_path):
    run = ["train", "--task", TASK, "--pop", "4", "--k", "2", "--sigma", "0.05", "--alpha", "0.05", "--run-dir"]
    learnability.main([*run, str(tmp_path / "es"), "--gens", "2"])
    learnability.main([*run, str(tmp_path / "es"), "--gens", "3"])
    log = [json.loads(line) for line in (tmp_path / "es" / "generations.jsonl").read_text().splitlines()]
    assert [row["generation"] for row in log] == [1, 2, 3]
    assert len((tmp_path / "es" / "es_history.jsonl").read_text().splitlines()) == 3
    learnability.main([*run, str(tmp_path / "straight"), "--gens", "3"])
    straight = [json.loads(line) for line in (tmp_path / "straight" / "generations.jsonl").read_text().splitlines()]
    assert np.allclose([row["rewards"] for row in straight], [row["rewards"] for row in log], atol=1e-5)
    with pytest.raises(SystemExit, match="other settings"):
        learnability.main([*run, str(tmp_path / "es"), "--gens", "3", "--seed", "1"])


def test_the_control_tells_a_permutation_of_the_same_rewards(tiny, tmp_path):
    run = ["train", "--task", TASK, "--pop", "4", "--k", "2", "--gens", "1", "--sigma", "0.05", "--run-dir"]
    learnability.main([*run, str(tmp_path / "control"), "--shuffle"])
    (row,) = [json.loads(line) for line in (tmp_path / "control" / "generations.jsonl").read_text().splitlines()]
    assert sorted(row["told"]) == pytest.approx(sorted(row["rewards"])) and row["told"] != row["rewards"]


def test_the_held_out_record_pairs_each_side_and_corrects_the_primary_tests_together(tiny, tmp_path):
    run = ["train", "--task", TASK, "--pop", "4", "--k", "2", "--gens", "2", "--sigma", "0.05", "--alpha", "0.5"]
    learnability.main([*run, "--run-dir", str(tmp_path / "es")])
    learnability.main([*run, "--run-dir", str(tmp_path / "control"), "--shuffle"])
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"other": 1}))
    learnability.main(
        ["heldout", "--task", TASK, "--trained", str(tmp_path / "es"), "--control", str(tmp_path / "control")]
        + ["--results", str(results)]
    )
    evidence = json.loads(results.read_text())
    record = evidence["learnability"]
    assert evidence["other"] == 1
    assert set(record["sides"]) == {"base", "trained", "control"}
    assert all(len(side["argmax"]) == 400 and len(side["sampled"]) == 200 for side in record["sides"].values())
    assert record["sides"]["trained"]["argmax"] != record["sides"]["base"]["argmax"], "the replayed weights moved"
    tests = record["tests"]
    primary = {name: tests[name] for name in learnability.PRIMARY}
    assert all(test["family"] == "primary" for test in primary.values())
    smaller, larger = sorted(primary.values(), key=lambda test: test["p_two_sided"])
    assert smaller["p_holm"] == pytest.approx(min(1.0, 2 * smaller["p_two_sided"]))
    assert larger["p_holm"] >= smaller["p_holm"]
    trained, base = (np.array(record["sides"][side]["argmax"]) for side in ("trained", "base"))
    assert tests["argmax:trained_vs_base"]["gained"] == int((trained & ~base).sum())
    assert {tests[name]["family"] for name in tests if name not in learnability.PRIMARY} == {"secondary"}
    assert record["primary_endpoint_met"] == all(
        t["p_holm"] < learnability.ALPHA and t["gained"] > t["lost"] for t in primary.values()
    )


def test_sides_measured_apart_are_reused_from_the_cache(tiny, tmp_path, capsys):
    cache = tmp_path / "sides"
    learnability.main(["heldout", "--task", TASK, "--only", "base", "--cache", str(cache)])
    assert [p.name for p in cache.iterdir()] == ["base.json"]
    kept = json.loads((cache / "base.json").read_text())
    capsys.readouterr()
    record = learnability.heldout(
        learnability.argparse.Namespace(
            model="tiny", task=TASK, seed=0, trained=None, control=None, results=None, cache=str(cache), only=None
        )
    )["heldout"]
    assert record["sides"]["base"] == kept and '"side": "base"' not in capsys.readouterr().out, "not measured again"
