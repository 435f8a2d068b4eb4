"""experiments/evidence: a finished agent run is recorded episode by episode, and RESULTS.md is computed
from the evidence file (and is not stale)."""

from __future__ import annotations

import json
import math
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_agent_es import CONFIG as AGENT_CONFIG

from coevo.cli import main as coevo
from coevo.stats import poisson_binomial_p

EVIDENCE = Path(__file__).resolve().parents[1] / "experiments" / "evidence"
sys.path.insert(0, str(EVIDENCE))
import agent_run  # noqa: E402
import answer_format  # noqa: E402
import bpp_pairs  # noqa: E402
import move_choice  # noqa: E402
import move_choice_es  # noqa: E402
import operator_heldout  # noqa: E402
import summary  # noqa: E402
import weights_effect  # noqa: E402

CONFIG = (
    AGENT_CONFIG.replace("budget = 8", "budget = 12")
    .replace('env = "gridnav"', 'env = "gridnav-dense"')
    .replace("episodes = 4", "episodes = 2")
    .replace("heldout_episodes = 6", 'heldout = "test"\nheldout_episodes = 5\nheldout_every = 1')
)


def test_a_finished_run_is_recorded_paired_by_episode_with_its_curve(tmp_path: Path, one_torch_thread) -> None:
    config = tmp_path / "es.toml"
    config.write_text(CONFIG)
    assert coevo(["run", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"speedup": {"kept": True}}))
    code = agent_run.main(
        [
            str(tmp_path / "run"),
            "--key",
            "gridnav",
            "--config",
            "c.toml",
            "--results",
            str(results),
            "--plot",
            str(tmp_path / "curve.png"),
        ]
    )
    assert code == 0
    evidence = json.loads(results.read_text())
    assert evidence["speedup"] == {"kept": True}
    record = evidence["gridnav"]
    assert record["command"] == "coevo run c.toml" and record["split"] == "test"
    assert len(record["episode_seeds"]) == len(record["base"]) == len(record["after"]) == 5
    assert set(record["base"]) | set(record["after"]) <= {0, 1}
    assert [p["generation"] for p in record["curve"]] == [0, 1, 2, 3]
    assert record["curve"][0]["successes"] == sum(record["base"]) and record["curve"][-1]["successes"] == sum(
        record["after"]
    )
    assert (tmp_path / "curve.png").stat().st_size > 1000


def test_an_unfinished_or_missing_run_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    assert (
        agent_run.main(
            [str(tmp_path / "nothing"), "--key", "k", "--config", "c", "--results", str(tmp_path / "r.json")]
        )
        == 2
    )
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "r.json").exists()


def test_the_paired_figures_are_computed_from_the_outcomes() -> None:
    base = [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    after = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0]  # 7 gained, none lost
    record = {"command": "coevo run x.toml", "updates": "9 ES updates", "split": "test", "base": base, "after": after}
    text = summary.paired_episodes("T", record, "t.png")
    assert "| base | 2/12 (16.7%" in text and "| after training | 9/12 (75.0%" in text
    assert "7 episodes solved only after training, 0 only before" in text
    assert f"p = {2 * 0.5**7:.3g} (exact, n = 7)" in text, "all seven discordant pairs one way: the exact sign test"
    assert "held-out success holds at p < 0.05" in text
    flipped = summary.paired_episodes("T", {**record, "base": after, "after": base}, "t.png")
    assert "does not hold: success fell, at p < 0.05" in flipped
    unclear = summary.paired_episodes("T", {**record, "after": [1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]}, "t.png")
    assert "held-out success does not hold at p < 0.05" in unclear
    assert "Not run yet" in summary.paired_episodes("T", None, "t.png")


def test_the_committed_results_page_is_what_the_evidence_file_gives() -> None:
    assert summary.main(["--check"]) == 0, "run: python experiments/evidence/summary.py"


def test_a_study_is_recorded_trial_by_trial_with_what_stopped_it(tmp_path: Path) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(tmp_path / "journal.log")))
    study = optuna.create_study(study_name="gridnav_tune", storage=storage, direction="maximize")
    done = study.ask({"alpha": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    done.set_user_attr("heldout_before", "3/32")
    done.set_user_attr("heldout_after", "5/32")
    study.tell(done, 5 / 32)
    failed = study.ask()
    failed.set_user_attr("error", "RuntimeError: out of memory")
    study.tell(failed, state=optuna.trial.TrialState.FAIL)
    study.ask()  # left running, as a study stopped mid-trial leaves it
    trials = agent_run.tune_record(tmp_path, "experiments/evidence/gridnav_tune.toml")
    assert [t["state"] for t in trials] == ["complete", "fail: RuntimeError: out of memory", "stopped unfinished"]
    assert trials[0]["before"] == "3/32" and trials[0]["after"] == "5/32" and "alpha" in trials[0]["params"]
    table = summary.tune_section(trials)
    assert "3/32 -> 5/32 | complete" in table and "| - | stopped unfinished |" in table


@pytest.fixture(scope="module")
def tiny_bpp_grid(tmp_path_factory) -> Path:
    """The evidence grid's three arms on two seeds, shrunk to seconds with the scripted LLM."""
    from grid import main as run_grid  # importable once bpp_pairs is: experiments/ is on the path

    out = tmp_path_factory.mktemp("grid")
    args = ["--tasks", "bpp_online", "--methods", "eoh", "eoh+es", "coevo", "--budgets", "24", "--seeds", "0", "1"]
    tiny = ["--scale", "0.5", "--model", "scripted_llm:build", "--eval-limit", "3", "--out", str(out)]
    assert run_grid([*args, *tiny]) == 0
    return out


def test_the_bpp_grid_is_paired_by_seed_on_its_answers_val_and_test_gaps(tiny_bpp_grid: Path, tmp_path: Path) -> None:
    """Each finished run's answer is validated once (stored in the run) and scored on test; a seed whose
    three runs have not all finished stays pending instead of entering a pair."""
    from coevo.evaluate.evaluator import Evaluator
    from coevo.run.store import RunStore
    from tasks import get_task

    out = tmp_path / "grid"
    shutil.copytree(tiny_bpp_grid, out)
    shutil.rmtree(bpp_pairs.Setting("bpp_online", "coevo", 24, 1).run_dir(out))
    results = tmp_path / "results.json"
    assert bpp_pairs.main([str(out), "--budget", "24", "--seeds", "0", "1", "--results", str(results)]) == 0
    record = json.loads(results.read_text())["bpp_online"]
    assert (record["seeds"], record["pending"]) == ([0], [1])
    assert set(record["runs"]["eoh"]) == {"0", "1"} and set(record["runs"]["coevo"]) == {"0"}
    store = RunStore.open(bpp_pairs.Setting("bpp_online", "eoh+es", 24, 0).run_dir(out))
    validation, (answer, chosen_on) = store.validation(), store.answer()
    written = [c for _, c in store.candidates() if c.operator != "library"]
    store.close()
    figures = record["runs"]["eoh+es"]["0"]
    assert chosen_on == "val" and figures["key"] == answer.key and figures["val"] == validation["best"]["gap_pct"]
    with Evaluator("bpp_online", "test", limit=3, workers=1) as evaluator:
        assert figures["test"] == evaluator.evaluate(answer.code).gap_pct
    assert figures["updates"] >= 1 and record["runs"]["eoh"]["0"]["updates"] == 0
    # the scripted LLM writes the same code under any weights: every ES step ties, so none has a direction
    assert figures["directed_updates"] == 0 and record["directed_updates"] == [0, 0]
    assert figures["valid_rate"] == sum(c.valid for c in written) / len(written)
    eoh = record["runs"]["eoh"]["0"]
    assert record["pairs"]["eoh+es vs eoh"] == [[figures["val"], eoh["val"]]]
    assert record["test_pairs"]["coevo vs eoh"] == [[record["runs"]["coevo"]["0"]["test"], eoh["test"]]]
    page = summary.bpp_section(record)
    assert "all three runs finished on seeds 0 (n = 1)" in page and "of which 0 to 0 had a direction" in page
    assert "With 1 paired seeds the exact test cannot give p below 1 " in page
    eoh_store = RunStore.open(bpp_pairs.Setting("bpp_online", "eoh", 24, 0).run_dir(out))
    eoh_answer, _ = eoh_store.answer()
    eoh_store.close()
    marker = " (seed)" if eoh_answer.code == get_task("bpp_online").seed_code() else ""
    assert f"| 0 | {eoh['val']:.2f} / {eoh['test']:.2f}{marker}, valid" in page
    assert f"0/{figures['updates']} directed" in page
    coevo = record["runs"]["coevo"]["0"]
    assert f"Directed updates of the coevo runs, sorted: {coevo['directed_updates']} (the table gives" in page
    second = tmp_path / "second.json"
    assert (
        bpp_pairs.main(
            [str(out), "--budget", "24", "--seeds", "0", "1", "--results", str(second), "--key", "bpp_online_v2"]
        )
        == 0
    )
    v2 = json.loads(second.read_text())
    assert set(v2) == {"bpp_online_v2"} and v2["bpp_online_v2"]["runs"] == record["runs"]
    page_v2 = summary.bpp_section(v2["bpp_online_v2"], key="bpp_online_v2")
    assert page_v2.startswith("## Co-evolution against prompt-only on bpp_online, second grid (pre-registered)")
    assert f"bpp_pairs.py {out} --key bpp_online_v2`" in page_v2 and "Directed updates of the coevo runs" not in page_v2
    assert "experiments/evidence/bpp_v2_runs.tar.xz" in page_v2


def measured_copy(grid: Path, tmp_path: Path) -> tuple[Path, list[str], Path, dict]:
    """A copy of the tiny grid measured once: its directory, bpp_pairs' arguments, the evidence file and
    what it recorded."""
    out = tmp_path / "grid"
    shutil.copytree(grid, out)
    results = tmp_path / "results.json"
    arguments = [str(out), "--budget", "24", "--seeds", "0", "1", "--results", str(results)]
    assert bpp_pairs.main(arguments) == 0
    return out, arguments, results, json.loads(results.read_text())["bpp_online"]


def test_a_test_verdict_that_hit_a_time_limit_is_measured_again_and_a_still_invalid_one_is_left_out(
    tiny_bpp_grid: Path, tmp_path: Path, monkeypatch
) -> None:
    """A timed-out verdict in the cache (the grid's load can cause one) is not the answer's test figure;
    an answer invalid on test is named and kept out of the test pairs, not paired as a number."""
    from coevo.evaluate.evaluator import EvalResult

    out, arguments, results, measured = measured_copy(tiny_bpp_grid, tmp_path)
    run = bpp_pairs.Setting("bpp_online", "eoh+es", 24, 0).run_dir(out)
    [cached] = [f for f in (run / "eval-cache").glob("*.json") if json.loads(f.read_text())["split"] == "test"]
    timed_out = {**json.loads(cached.read_text()), "valid": False, "objective": None, "gap_pct": None}
    cached.write_text(json.dumps({**timed_out, "reason": "instance 2/3 (x): timed out (per-instance limit 30 s)"}))
    assert bpp_pairs.main(arguments) == 0
    assert json.loads(results.read_text())["bpp_online"] == measured

    answer_on_test = bpp_pairs.answer_on_test

    def invalid_for_coevo(config, code: str, cache: Path) -> EvalResult:
        result = answer_on_test(config, code, cache)
        if config.method != "coevo":
            return result
        return replace(result, valid=False, objective=None, gap_pct=None, reason="instance 1/3 (x): raised")

    monkeypatch.setattr(bpp_pairs, "answer_on_test", invalid_for_coevo)
    assert bpp_pairs.main(arguments) == 0
    record = json.loads(results.read_text())["bpp_online"]
    assert record["invalid_on_test"] == {f"coevo seed {s}": "instance 1/3 (x): raised" for s in (0, 1)}
    assert record["test_pairs"] == {**measured["test_pairs"], "coevo vs eoh": []}
    assert record["pairs"] == measured["pairs"]
    page = summary.bpp_section(record)
    assert "- coevo seed 0 is left out of the test pairs, invalid on test: instance 1/3 (x): raised" in page
    assert "coevo vs eoh, test gap: no seed to pair" in page and " / invalid" in page


def test_runs_recorded_earlier_keep_their_figures_when_their_directories_are_gone(
    tiny_bpp_grid: Path, tmp_path: Path
) -> None:
    """A grid spread over machines: what one machine recorded stays when its run directories are not
    here, but only for the budget it was recorded at."""
    out, arguments, results, measured = measured_copy(tiny_bpp_grid, tmp_path)
    assert measured["seeds"] == [0, 1]
    for method, seed in (("eoh", 1), ("eoh+es", 0)):
        shutil.rmtree(bpp_pairs.Setting("bpp_online", method, 24, seed).run_dir(out))
    assert bpp_pairs.main(arguments) == 0
    assert json.loads(results.read_text())["bpp_online"] == measured
    assert bpp_pairs.main([str(out), "--budget", "48", "--seeds", "0", "1", "--results", str(results)]) == 0
    other_budget = json.loads(results.read_text())["bpp_online"]
    assert (other_budget["runs"], other_budget["seeds"], other_budget["pending"]) == ({}, [], [0, 1])


def test_the_weights_effect_answers_the_same_prompts_under_base_and_replayed_weights(
    tiny_bpp_grid: Path, tmp_path: Path, capsys
) -> None:
    """The scripted LLM writes the same code under any weights, so its members tie and the run's updates
    are zero steps; a copy whose stored steps are made non-zero must come back with other weights. Runs
    measured in one call share one base side, the one each would get alone."""
    import sqlite3

    from coevo.es.perturbation import Update
    from coevo.es.update_log import UpdateRecord

    run = bpp_pairs.Setting("bpp_online", "eoh+es", 24, 0).run_dir(tiny_bpp_grid)
    moved = tmp_path / "moved"
    shutil.copytree(run, moved)
    with sqlite3.connect(moved / "run.sqlite") as db:
        for step, text in db.execute("SELECT step, record FROM es_updates").fetchall():
            record = UpdateRecord.from_json(text)  # no update at all when every child was invalid
            seeds = tuple(dict.fromkeys(record.seeds))
            steps = tuple(1.0 if i % 2 else -1.0 for i in range(len(seeds)))
            moved_record = replace(record, update=Update(seeds, steps, record.alpha))
            db.execute("UPDATE es_updates SET record = ? WHERE step = ?", (moved_record.to_json(), step))
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"ahd_weights_effect": {"other": {"kept": True}}}))
    both = [str(run), str(moved), "--samples", "4", "--name", "eoh+es/s0", "moved", "--results", str(results)]
    assert weights_effect.main(both) == 0  # one base side for both runs
    entries = json.loads(results.read_text())["ahd_weights_effect"]
    assert entries["other"] == {"kept": True}
    assert not entries["eoh+es/s0"]["weights_changed"] and entries["moved"]["weights_changed"]
    figures = entries["moved"]
    assert figures["updates"] >= 1
    for side in (figures["before"], figures["after"]):
        samples = side["samples"]
        assert len(samples) == 4 and side["valid_rate"] == sum(s["valid"] for s in samples) / 4
        gaps = [s["gap_pct"] for s in samples if s["valid"]]
        assert side["mean_gap_pct"] == (sum(gaps) / len(gaps) if gaps else None)
    assert entries["eoh+es/s0"]["directed_updates"] == 0 and figures["directed_updates"] == figures["updates"]
    del entries["other"]
    page = summary.weights_effect_section(entries)
    assert f"| moved | {figures['updates']} ({figures['updates']}) | {figures['before']['valid_rate']:.0%} ->" in page
    changed = sum(b != a for b, a in zip(figures["before"]["samples"], figures["after"]["samples"], strict=True))
    assert f"| {changed} of 4 |" in page
    seed_gap, after = figures["seed_gap_pct"], [s["gap_pct"] for s in figures["after"]["samples"] if s["valid"]]
    counts = sum(g < seed_gap for g in after), sum(g == seed_gap for g in after), sum(g > seed_gap for g in after)
    assert f" -> {'/'.join(map(str, counts))} |" in page and sum(counts) == len(after)
    alone = tmp_path / "alone.json"
    assert weights_effect.main([str(moved), "--samples", "4", "--results", str(alone)]) == 0
    measured_alone = json.loads(alone.read_text())["ahd_weights_effect"]["eoh+es/s0"]  # named from its config
    assert measured_alone["before"] == figures["before"] and measured_alone["after"] == figures["after"]
    eoh = bpp_pairs.Setting("bpp_online", "eoh", 24, 0).run_dir(tiny_bpp_grid)
    assert weights_effect.main([str(eoh), "--results", str(results)]) == 2
    hotter = tmp_path / "hotter"
    shutil.copytree(run, hotter)
    with sqlite3.connect(hotter / "run.sqlite") as db:
        db.execute("UPDATE meta SET value = json_set(value, '$.llm.temperature', 0.3) WHERE key = 'config'")
    capsys.readouterr()
    assert weights_effect.main([str(run), str(hotter), "--results", str(results)]) == 2
    assert "differ in model, task, sampling, evaluation or dtype" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        weights_effect.main([str(run), str(moved), "--name", "only-one", "--results", str(results)])


def moved_copy(run: Path, target: Path) -> Path:
    """A copy of an ES run whose stored steps are made non-zero (the scripted LLM's members tie, so the
    run's own updates are zero steps): its replayed weights differ from the base weights."""
    import sqlite3

    from coevo.es.perturbation import Update
    from coevo.es.update_log import UpdateRecord

    shutil.copytree(run, target)
    with sqlite3.connect(target / "run.sqlite") as db:
        for step, text in db.execute("SELECT step, record FROM es_updates").fetchall():
            record = UpdateRecord.from_json(text)
            seeds = tuple(dict.fromkeys(record.seeds))
            steps = tuple(1.0 if i % 2 else -1.0 for i in range(len(seeds)))
            moved_record = replace(record, update=Update(seeds, steps, record.alpha))
            db.execute("UPDATE es_updates SET record = ? WHERE step = ?", (moved_record.to_json(), step))
    return target


def test_the_operator_is_measured_on_held_out_tasks_paired_by_answer(tiny_bpp_grid: Path, tmp_path: Path) -> None:
    """ES trained on bpp_online's prompts; tsp_construct's prompts are answered under base and trained
    weights with the same streams, each answer marked valid and better than the seed, tested paired."""
    run = moved_copy(bpp_pairs.Setting("bpp_online", "eoh+es", 24, 0).run_dir(tiny_bpp_grid), tmp_path / "moved")
    results = tmp_path / "results.json"
    args = [str(run), "--tasks", "tsp_construct", "--per-task", "6", "--in-task", "--results", str(results)]
    assert operator_heldout.main(args) == 0
    figures = json.loads(results.read_text())["operator_heldout"]["eoh+es/s0"]
    assert figures["trained_on"] == "bpp_online" and figures["updates"] >= 1
    tsp = figures["held_out"]["tasks"]["tsp_construct"]
    assert tsp["base"]["weights_sha256"] != tsp["trained"]["weights_sha256"]
    base, trained = tsp["base"]["samples"], tsp["trained"]["samples"]
    assert len(base) == len(trained) == 6
    for sample in base + trained:
        assert sample["better"] == (sample["valid"] and sample["gap_pct"] < tsp["seed_gap_pct"])
    valid = figures["held_out"]["tests"]["valid"]
    gained = sum(not b["valid"] and t["valid"] for b, t in zip(base, trained, strict=True))
    lost = sum(b["valid"] and not t["valid"] for b, t in zip(base, trained, strict=True))
    assert (valid["gained"], valid["lost"], valid["n"]) == (gained, lost, 6)
    assert valid["p"] == operator_heldout.mcnemar_exact(gained, lost) and valid["p_holm"] >= valid["p"]
    assert set(figures["in_task"]["tasks"]) == {"bpp_online"}  # reported apart from the held-out tests
    page = summary.operator_section({"eoh+es/s0": figures})
    assert f"eoh+es/s0 (trained on bpp_online, {figures['updates']} updates of which" in page
    assert (
        f"- valid: {valid['base']}/6 -> {valid['trained']}/6 (gained {gained}, lost {lost}; p = {valid['p']:.3g}"
        in page
    )
    assert "PROTOCOL" not in page and "Not measured yet" in summary.operator_section(None)
    own_task = [str(run), "--tasks", "bpp_online", "--per-task", "2", "--results", str(results)]
    assert operator_heldout.main(own_task) == 2
    eoh = bpp_pairs.Setting("bpp_online", "eoh", 24, 0).run_dir(tiny_bpp_grid)
    assert operator_heldout.main([str(eoh), "--tasks", "tsp_construct", "--results", str(results)]) == 2


def test_mcnemar_counts_only_the_answers_that_changed() -> None:
    base = [{"valid": v, "better": b} for v, b in [(1, 0), (1, 1), (0, 0), (0, 0), (1, 0)]]
    trained = [{"valid": v, "better": b} for v, b in [(1, 1), (0, 0), (1, 0), (1, 1), (1, 0)]]
    result = operator_heldout.paired_test(base, trained, "valid")
    assert (result["base"], result["trained"], result["gained"], result["lost"]) == (3, 4, 2, 1)
    assert result["p"] == pytest.approx(1.0)
    better = operator_heldout.paired_test(base, trained, "better")
    assert (better["gained"], better["lost"]) == (2, 1)


def test_the_answer_formats_answer_the_same_requests_and_are_scored_alike(tmp_path: Path) -> None:
    """The scripted LLM's answer depends on the prompt text, so the two formats get different answers to
    the same requests; each side's summary is its samples', and the page pairs them by answer."""
    results = tmp_path / "results.json"
    args = ["--model", "scripted_llm:build", "--task", "tsp_construct", "--samples", "6", "--eval-limit", "2"]
    assert answer_format.main([*args, "--results", str(results)]) == 0
    record = json.loads(results.read_text())["answer_format"]
    assert record["command"].endswith("--samples 6 --eval-limit 2") and record["task"] == "tsp_construct"
    former, current = record["former"], record["current"]
    assert former["samples"] != current["samples"], "the prompts differ, so the scripted answers differ"
    for side in (former, current):
        assert len(side["samples"]) == 6 and side["valid_rate"] == sum(s["valid"] for s in side["samples"]) / 6
    page = summary.answer_format_section(record)
    only_current = sum(
        c["valid"] and not f["valid"] for f, c in zip(former["samples"], current["samples"], strict=True)
    )
    assert f"{only_current} usable only under the current format" in page
    as_seed = sum(s["valid"] and s["gap_pct"] == record["seed_gap_pct"] for s in current["samples"])
    assert f"| current: idea in the docstring | {sum(s['valid'] for s in current['samples'])}/6" in page
    assert f"| {as_seed} | " in page.split("current: idea in the docstring")[1]
    assert answer_format.main(["--model", "no-such-model", "--results", str(results)]) == 2
    with pytest.raises(SystemExit) as exited:
        answer_format.main(["--samples", "1", "--results", str(results)])
    assert exited.value.code == 2


def test_decode_speed_rows_come_from_the_recorded_figures() -> None:
    figures = {
        "dtype": "float32",
        "torch_threads": 1,
        "lean_batch1_tokens_per_s": 9.74,
        "lean_batch1_tokens_per_cpu_s": 14.48,
        "lean_batch8_tokens_per_s": 39.13,
        "lean_batch8_tokens_per_cpu_s": 56.08,
        "lean_over_generate_batch1": 0.99,
        "cpu": "Some CPU",
    }
    anchored = {**figures, "anchor_tokens_per_s": 67.0, "lean_batch1_over_anchor": 0.145}
    text = summary.decode_section({"m1": anchored, "m2": figures})
    assert "| m1 | float32 | 1 | 9.7 (14.5) | 39.1 (56.1) | 0.99 |" in text and "on Some CPU" in text
    assert text.count("of the 67 tokens/s") == 1 and "m1: the lean loop's one stream is 0.14 of" in text
    assert summary.decode_section(None) == ""


def test_the_move_choice_reads_the_closing_moves_under_base_and_replayed_weights(
    tiny_bpp_grid: Path, tmp_path: Path, one_torch_thread, capsys
) -> None:
    """The closing moves are those that shorten the distance when the environment applies them; batching
    with left padding gives each turn what it gets alone; the run's updates move the probabilities; a
    run that is not on gridnav is refused in one line."""
    import numpy as np

    from tasks.agents import make_env

    config = tmp_path / "es.toml"
    config.write_text(CONFIG)
    assert coevo(["run", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    results = tmp_path / "results.json"
    assert move_choice.main([str(tmp_path / "run"), "--episodes", "6", "--results", str(results)]) == 0
    record = json.loads(results.read_text())["gridnav_move_choice"]
    seeds = record["episode_seeds"]
    assert len(seeds) == len(record["base"]) == len(record["chance"]) == 6
    for seed, chance in zip(seeds, record["chance"], strict=True):
        closing = 0
        for direction in ("up", "down", "left", "right"):
            env = make_env("gridnav", 2)
            env.reset(seed)
            distance = lambda: sum(abs(p - g) for p, g in zip(env.position, env.goal, strict=True))  # noqa: E731
            before = distance()
            env.step(f"move {direction}")
            closing += distance() < before
        assert chance == closing / 4
    walker = record["random_walk_success"]
    assert len(walker) == 6 and all(0 < share < 1 for share in walker)  # 2 moves away, 6 turns: sometimes
    run = move_choice.StoredRun.open(tmp_path / "run")
    llm, _ = run.model(replayed=False)
    turns = move_choice.first_turns(run.config.workload.env, 2, seeds)
    alone = [move_choice.closing_probabilities(llm, [turn])[0] for turn in turns]
    assert alone == pytest.approx(record["base"], abs=1e-5)
    assert all(0 < p < 1 for p in record["base"])
    figures = record["runs"]["run"]
    assert figures["weights_changed"] and figures["updates"] >= 1
    assert figures["after"] != pytest.approx(record["base"], abs=1e-6)
    page = summary.move_choice_section(record)
    assert f"| chance (a move drawn at random) | {np.mean(record['chance']):.3f} |" in page
    assert f"| run ({figures['updates']} updates) | {np.mean(figures['after']):.3f} |" in page
    moved = abs(np.mean(figures["after"]) - np.mean(record["base"]))
    assert f"The runs moved the mean by at most {moved:.4f}." in page
    assert f"solves {sum(walker):.1f} of these 6 episodes on average (its rate on each episode" in page
    capsys.readouterr()
    not_gridnav = bpp_pairs.Setting("bpp_online", "eoh+es", 24, 0).run_dir(tiny_bpp_grid)
    assert move_choice.main([str(not_gridnav), "--results", str(results)]) == 2
    assert "not a gridnav agent run" in capsys.readouterr().err


def test_es_on_the_closing_move_probability_starts_from_the_base_and_moves_the_weights(
    tmp_path: Path, one_torch_thread, capsys, monkeypatch
) -> None:
    """Generation 0 of the held-out curve is what `move_choice` gives the base weights; the updates move
    the held-out probabilities; an odd population is refused before any model loads."""
    from coevo.run.build import load_llm
    from coevo.run.config import validate

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))  # tiny_lm, as a model factory
    results = tmp_path / "results.json"
    tiny = ["--model", "tiny_lm:build_tiny_agent", "--population", "4", "--turns", "2", "--episodes", "5"]
    args = [*tiny, "--generations", "3", "--every", "2", "--sigma", "0.5", "--alpha", "0.1"]
    assert move_choice_es.main([*args, "--results", str(results)]) == 0
    record = json.loads(results.read_text())["gridnav_move_choice_es"]
    assert [point["generation"] for point in record["curve"]] == [0, 2, 3]
    config = validate(
        {
            "method": "es",
            "model": "tiny_lm:build_tiny_agent",
            "budget": 1,
            "workload": {"kind": "agent", "env": "gridnav"},
        }
    )
    turns = move_choice.first_turns("gridnav", 2, record["episode_seeds"])
    base = move_choice.closing_probabilities(load_llm(config, "float32"), turns)
    assert record["curve"][0]["heldout"] == pytest.approx(base, abs=1e-6)
    assert record["curve"][-1]["heldout"] != pytest.approx(base, abs=1e-6)
    assert "generation 3: members" in capsys.readouterr().out
    page = summary.move_choice_es_section(record)
    assert "--generations 3 --population 4 --turns 2" in page and "at generation 3;" in page
    with pytest.raises(SystemExit):
        move_choice_es.main([*tiny, "--population", "3", "--results", str(results)])


def test_runs_measured_against_different_base_sides_are_grouped_on_the_page() -> None:
    """Calls on two machines drew other base answers: the page says which runs share which base."""

    def entry(valid_rate: float) -> dict:
        side = {"valid_rate": valid_rate, "mean_gap_pct": 5.0, "samples": [{"valid": True, "gap_pct": 5.0}]}
        return {"updates": 2, "directed_updates": 1, "samples": 1, "seed_gap_pct": 5.0, "before": side, "after": side}

    one_call = {"a/s0": entry(0.5), "b/s0": entry(0.5)}
    assert summary.base_sides_note(one_call) == ""
    page = summary.weights_effect_section({**one_call, "c/s1": entry(0.75)})
    assert "measured in 2 calls whose base answers differ: a/s0, b/s0 (50% valid); c/s1 (75% valid)." in page


def test_the_walker_test_is_the_exact_binomial_one_when_every_episode_has_the_same_rate() -> None:
    def binomial_two_sided(k: int, n: int, p: float) -> float:
        mass = [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
        return min(1.0, 2 * min(sum(mass[: k + 1]), sum(mass[k:])))

    assert poisson_binomial_p(3, [0.5] * 10) == pytest.approx(binomial_two_sided(3, 10, 0.5))
    assert poisson_binomial_p(14, [0.2] * 100) == pytest.approx(binomial_two_sided(14, 100, 0.2))
    assert poisson_binomial_p(0, [0.0, 1.0]) == pytest.approx(0.0)  # the sure episode was lost
    with pytest.raises(ValueError):
        poisson_binomial_p(3, [0.5, 0.5])


def agent_record(base: list[int], after: list[int], seeds: list[int]) -> dict:
    """A trained agent run's evidence record on `seeds`."""
    record = {"command": "c", "updates": "2 updates", "split": "test", "episode_seeds": seeds}
    return {**record, "base": base, "after": after}


def test_tests_on_the_same_episodes_are_corrected_together_and_the_page_says_what_survives() -> None:
    """Three arms on the same 20 episodes and one on others: Holm within the three, and a fall that is
    significant alone is restated as not significant after the correction."""
    seeds, others = list(range(20)), list(range(100, 120))
    fell = agent_record([1] * 12 + [0] * 8, [0] * 10 + [1] * 2 + [0] * 8, seeds)  # 10 lost, none gained
    unchanged = agent_record([1] * 5 + [0] * 15, [1] * 5 + [0] * 15, seeds)
    evidence = {
        "gridnav": unchanged,
        "gridnav_greedy": fell,
        "gridnav_shared": {**unchanged, "after": [0] * 4 + [1] * 2 + [0] * 14},
        "grpo": {**fell, "episode_seeds": others},
    }
    tests = summary.episode_tests(evidence)
    corrected = summary.corrected_by_episodes(tests)
    assert {name: c.family for name, c in corrected.items()} == {
        "gridnav": 3,
        "gridnav_greedy": 3,
        "gridnav_shared": 3,
        "grpo": 1,
    }
    raw = 2 * 0.5**10
    assert corrected["gridnav_greedy"].raw == pytest.approx(raw) and corrected["grpo"].adjusted == pytest.approx(raw)
    assert corrected["gridnav_greedy"].adjusted == pytest.approx(3 * raw)
    page = summary.paired_episodes("T", fell, "t.png", corrected["gridnav_greedy"])
    assert f"Holm-corrected over the 3 tests on these episodes, p = {3 * raw:.3g}" in page
    assert "does not hold: success fell, at p < 0.05" in page, "0.0059 stays below 0.05 after the correction"
    borderline = summary.Corrected(raw=0.0386, adjusted=0.116, family=3)
    text = summary.paired_episodes("T", fell, "t.png", borderline)
    assert "success fell at p < 0.05 before the correction, not after it" in text
    assert "not re-scorable" in text


def test_the_base_against_the_random_walker_is_tested_not_just_compared() -> None:
    seeds = list(range(40))
    record = {
        "model": "m",
        "env": "gridnav-dense",
        "horizon": 2,
        "split": "test",
        "episode_seeds": seeds,
        "chance": [0.5] * 40,
        "base": [0.5] * 40,
        "runs": {},
        "random_walk_success": [0.25] * 40,
    }
    few = agent_record([1] * 7 + [0] * 33, [0] * 40, seeds)  # 7 of 40 against an expected 10
    page = summary.move_choice_section(record, few)
    assert "solved 7 (first section): fewer, not significantly at p < 0.05" in page
    assert "The base weights' difference from chance is not significant at p < 0.05" in page
    worse = summary.move_choice_section({**record, "base": [0.3] * 40}, few)
    assert "The base weights choose worse than chance, at p < 0.05" in worse
    p = poisson_binomial_p(7, [0.25] * 40)
    assert f"p = {p:.3g})" in page
    none = agent_record([0] * 40, [0] * 40, seeds)
    assert "solved 0 (first section): significantly fewer" in summary.move_choice_section(record, none)
    evidence = {"gridnav": none, "gridnav_move_choice": record}
    corrected = summary.corrected_by_episodes(summary.episode_tests(evidence))
    assert set(corrected) == {"gridnav", "walker", "move choice: base vs chance"}
    assert "Holm" in summary.move_choice_section(record, none, corrected)


def test_a_run_that_answers_the_seed_is_marked_and_the_archive_decides_what_is_re_scorable(tmp_path: Path) -> None:
    import tarfile

    def run(key: str, updates: int) -> dict:
        return {"key": key, "val": 5.0, "test": 6.0, "valid_rate": 0.5, "updates": updates, "directed_updates": 0}

    record = {
        "command": bpp_pairs.COMMAND.format(budget=24, seeds="0 1", out="runs/bpp_evidence"),
        "seeds": [0, 1],
        "runs": {
            "eoh": {"0": run("seedkey", 0), "1": run("other", 0)},
            "coevo": {"0": run("x", 3), "1": run("seedkey", 3)},
        },
    }
    table = summary.bpp_runs_table(record, "seedkey")
    assert "| 0 | 5.00 / 6.00 (seed), valid 50% | 5.00 / 6.00, valid 50%, 0/3 directed |" in table
    assert "| 1 | 5.00 / 6.00, valid 50% | 5.00 / 6.00 (seed), valid 50%, 0/3 directed |" in table
    stored = tmp_path / "bpp_evidence" / "runs" / "bpp_online" / "coevo" / "b24-s1"
    stored.mkdir(parents=True)
    (stored / "run.sqlite").write_bytes(b"")
    archive = tmp_path / "runs.tar.xz"
    with tarfile.open(archive, "w:xz") as packed:
        packed.add(tmp_path / "bpp_evidence", arcname="bpp_evidence")
    archived = summary.archived_runs(archive)
    assert archived == {("bpp_evidence", "runs", "bpp_online", "coevo", "b24-s1")}
    note = summary.archive_note(record, archived)
    assert "(`tar -xJf` it into `runs/` to re-score them): coevo s1." in note
    assert "Not archived (finished on earlier machines whose stores are gone): eoh s0, eoh s1, coevo s0;" in note
    assert summary.is_archived(Path("/elsewhere") / "bpp_evidence/runs/bpp_online/coevo/b24-s1", archived)
    assert not summary.is_archived(Path("/elsewhere/bpp_evidence/runs/bpp_online/coevo/b24-s0"), archived)
    assert summary.archived_runs(tmp_path / "missing.tar.xz") == set()


def test_the_speed_up_is_split_where_recorded_and_marked_pending_where_not() -> None:
    measured = {"agent_generation": 4.37, "agent_generation_fp32": 2.65, "cpu_has_native_bf16": True}
    lean = {"dtype": "float32", "lean_over_generate_batch1": 0.99, "lean_over_generate_batch8": 1.17}
    decode = {summary.AGENT_MODEL: lean}
    pending = summary.speed_section(measured, decode)
    assert "as fast as before the lean decode loop" not in pending
    assert pending.count("are pending") == 2
    assert "runs 0.99x as fast as transformers' `generate` on one stream and 1.17x on a batch of 8" in pending
    split = {
        **measured,
        "agent_generation_reply_tokens": 2.1,
        "agent_generation_per_token": 2.08,
        "agent_generation_same_moves": [15, 16],
        "agent_generation_differing_moves": ["round 2, episode 3 (gridnav-H2/7)"],
    }
    page = summary.speed_section(split, decode)
    assert "- dtype chosen from the CPU: 4.37x: the baseline decoded 2.10x as many tokens (shorter replies)" in page
    assert "and this tree 2.08x as many tokens a second" in page
    assert "same moves in 15 of 16 episodes (they differ in round 2, episode 3 (gridnav-H2/7))." in page
    assert "- fp32 forced: 2.65x; its split" in page


def test_a_change_in_the_valid_share_is_tested_paired_and_corrected_within_its_base_call() -> None:
    def side(valid: list[bool]) -> dict:
        samples = [{"valid": v, "gap_pct": 5.0 if v else None} for v in valid]
        return {"valid_rate": sum(valid) / len(valid), "mean_gap_pct": 5.0, "samples": samples}

    base = [False] * 8 + [True] * 8
    entries = {
        name: {"updates": 2, "directed_updates": 1, "samples": 16, "seed_gap_pct": 5.0}
        | {"before": side(base), "after": side(after)}
        for name, after in (("up", [True] * 16), ("same", base))
    }
    tests = summary.valid_change_tests(entries)
    assert tests["up"].raw == pytest.approx(2 * 0.5**8) and tests["up"].adjusted == pytest.approx(4 * 0.5**8)
    assert tests["same"].raw == 1.0 and tests["up"].family == 2
    page = summary.weights_effect_section(entries)
    assert "50% -> 100% (p = 0.00781, Holm 0.0156)" in page and "for up only" in page
    assert page.count("| not archived |") == 2


def test_the_learnability_section_states_the_pre_registered_verdict_either_way() -> None:
    sides = {side: {"argmax": [1, 0, 1, 0], "sampled": [1, 1], "logp": -1.5} for side in ("base", "trained", "control")}
    tests = {"argmax:trained_vs_base": {"gained": 1, "lost": 0, "p_two_sided": 1.0, "p_holm": 1.0, "family": "primary"}}
    record = {"model": "m", "task": "t", "sides": sides, "tests": tests, "primary_endpoint_met": False}
    page = summary.learnability_section(record)
    assert "| trained | 2/4 (50.0%" in page and "| argmax:trained_vs_base | 1 | 0 | 1 | 1 (primary) |" in page
    assert "Primary endpoint not met" in page and "no gain is claimed" in page
    assert "Primary endpoint met" in summary.learnability_section({**record, "primary_endpoint_met": True})
    assert "Does ES sharpen" not in summary.render({}), "no section before the result exists"
