"""Novelty before evaluation: the judge's verdicts, the threshold, the cache of vectors, bounded tries,
what the store keeps of rejected children (never evaluated, never charged), exact resume, the report,
the settings, and the default embedder on the real embedded model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import fake_embedder
import numpy as np
import pytest
from scripted_llm import ScriptedLLM
from test_resume import coevo, kill_after, show
from test_runner import BASE

from coevo.candidate import code_key
from coevo.llm.base import Completion, Message, SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.novelty import JUDGE, NoveltyCheck, read_verdict
from coevo.run.config import ConfigError, validate
from coevo.run.report import render_report
from coevo.run.runner import Runner, summary
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore

SAMPLING = SamplingParams(seed=7)
TRIGRAMS = "fake_embedder:TrigramEmbedder"


# --- the judge's answer -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("novel: yes", "yes"),
        ("  Novel:   NO  ", "no"),
        ("B only renames the variables of A.\nnovel: no", "no"),
        ("", "unreadable"),
        ("yes", "unreadable"),
        ("novel: maybe", "unreadable"),
        ("novel: yes, B adds a term", "unreadable"),
        ("`novel: yes`", "unreadable"),
        ("novel: yes\nnovel: no", "unreadable"),
        ("novel: yes\nnovel: yes", "unreadable"),
    ],
)
def test_only_one_verdict_line_is_read_and_anything_else_is_unreadable(answer: str, verdict: str) -> None:
    assert read_verdict(answer) == verdict


# --- the check: threshold, judge, cache -----------------------------------------------------------------


class TableEmbedder:
    """Vectors looked up by code; counts what it was asked to embed."""

    name = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.asked += texts
        return np.array([self.table[text] for text in texts], dtype=np.float32)


class Judge:
    """Answers every judge prompt with `answer`, keeping the prompts."""

    name = "judge"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        self.prompts += [request[-1]["content"] for request in requests]
        assert sampling.temperature == 0.0, "the judge answers greedily"
        return [Completion(self.answer, 100, 4, 0.0, "stop") for _ in requests]


TABLE = {"member A": [1.0, 0.0], "member B": [0.0, 1.0], "close to A": [1.0, 0.1], "between": [1.0, 1.0]}
MEMBERS = {"a": "member A", "b": "member B"}


def judged(check: NoveltyCheck, children: list[str], ledger: BudgetLedger | None = None):
    pairs = [(code_key(code), code) for code in children]
    check.embed(MEMBERS | dict(pairs))
    return check.judgements(pairs, MEMBERS, SAMPLING, ledger or BudgetLedger())


def test_below_the_threshold_no_judge_is_asked_and_above_it_the_nearest_member_is_shown() -> None:
    judge = Judge("novel: no")
    ledger = BudgetLedger()
    check = NoveltyCheck(TableEmbedder(TABLE), judge, threshold=0.99)
    close, far = judged(check, ["close to A", "between"], ledger)
    assert far is None, "cosine 0.71 to either member: novel without a judge"
    assert close.neighbour == "a" and close.similarity == pytest.approx(1 / np.sqrt(1.01))
    assert close.verdict == "no" and not close.novel
    assert close.reason(3) == "not novel after 3 tries: cosine 0.9950 to a, judge: no"
    [prompt] = judge.prompts
    assert "member A" in prompt and "close to A" in prompt and "member B" not in prompt
    assert ledger.usage(operator=JUDGE).calls == 1 and ledger.usage(operator=JUDGE).prompt_tokens == 100


def test_the_threshold_decides_who_is_judged() -> None:
    similarity = 1 / np.sqrt(1.01)
    judge = Judge("novel: yes")
    [just_above] = judged(NoveltyCheck(TableEmbedder(TABLE), judge, threshold=similarity - 1e-6), ["close to A"])
    [just_below] = judged(NoveltyCheck(TableEmbedder(TABLE), judge, threshold=similarity + 1e-6), ["close to A"])
    assert just_above is not None and just_above.novel and just_below is None
    assert len(judge.prompts) == 1


def test_an_empty_population_judges_nobody() -> None:
    judge = Judge("novel: no")
    check = NoveltyCheck(TableEmbedder(TABLE), judge, threshold=0.5)
    check.embed({code_key("close to A"): "close to A"})
    assert check.judgements([(code_key("close to A"), "close to A")], {}, SAMPLING, BudgetLedger()) == [None]
    assert judge.prompts == []


def test_each_key_is_embedded_once_and_vectors_given_at_the_start_never() -> None:
    embedder = TableEmbedder(TABLE)
    check = NoveltyCheck(embedder, Judge("novel: yes"), threshold=0.99, vectors={"a": np.array([1.0, 0.0])})
    judged(check, ["close to A"])
    judged(check, ["close to A", "between"])
    assert embedder.asked == ["member B", "close to A", "between"]


# --- in a run ------------------------------------------------------------------------------------------


class VerdictLLM(ScriptedLLM):
    """The scripted LLM whose judge always answers `verdict`."""

    def __init__(self, verdict: str) -> None:
        super().__init__()
        self.verdict = verdict

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        answers = super().generate(requests, sampling)
        return [
            Completion(f"novel: {self.verdict}", 90, 3, 0.0, "stop") if "novel: yes" in request[-1]["content"] else a
            for request, a in zip(requests, answers, strict=True)
        ]


def novelty_config(**novelty) -> dict:
    return {**BASE, "method": "eoh", "novelty": {"enabled": True, "embedder": TRIGRAMS, **novelty}}


def test_a_child_never_judged_novel_is_asked_again_then_rejected_unevaluated_and_uncharged(tmp_path: Path) -> None:
    runner = start_run(validate(novelty_config(threshold=0.01, tries=2)), tmp_path, llm=VerdictLLM("no"))
    runs = []
    sandbox_run = runner.evaluator._sandbox.run
    runner.evaluator._sandbox.run = lambda code, limits: runs.append(code) or sandbox_run(code, limits)
    runner.run_step()  # generation 0: the seed, then 3 i1 samples judged against it
    store = runner.store
    candidates = [c for _, c in store.candidates()]
    rejected = [c for c in candidates if c.reason and c.reason.startswith("not novel")]
    assert rejected, "every child that parses is refused"
    assert runs == [runner.task.seed_code()], "only the seed reached the sandbox"
    parse_failures = [c for c in candidates if c.operator == "i1" and c not in rejected]
    assert all(not c.valid for c in parse_failures)
    assert runner.evaluations == 1 + len(parse_failures), "a rejected child costs no budget"
    evaluated = store._db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    assert evaluated == 1 + len(parse_failures)
    checks = store.novelty_checks()
    assert [c["outcome"] for c in checks].count("rejected") == len(rejected)
    assert {c["judge"] for c in checks} == {"no"}
    seed_key = candidates[0].key
    assert all(c["neighbour"] == seed_key and 0 < c["similarity"] < 1 for c in checks)
    for candidate in rejected:
        assert re.fullmatch(rf"not novel after 2 tries: cosine 0\.\d{{4}} to {seed_key}, judge: no", candidate.reason)
    per_request = [c["outcome"] for c in checks]
    assert per_request.count("resampled") <= 3 and per_request.count("rejected") <= 3, "at most 2 children a request"
    calls = store.llm_calls()
    judge_calls = [call for call in calls if call["operator"] == JUDGE]
    assert sorted(call["id"] for call in judge_calls) == sorted(c["judge_call"] for c in checks)
    refused = [call for call in calls if call["outcome"].startswith("rejected: not novel after 1 try")]
    assert len(refused) == per_request.count("resampled"), "each child asked again keeps its own call"
    totals = store.llm_totals(JUDGE)
    assert totals["calls"] == len(checks) and totals["prompt_tokens"] == 90 * len(checks)
    runner.close()


def test_a_judge_that_calls_every_child_novel_changes_nothing_but_its_own_calls(tmp_path: Path) -> None:
    with start_run(validate({**BASE, "method": "eoh"}), tmp_path / "off", llm=VerdictLLM("yes")) as off:
        off.run()
        expected = [c.to_dict() for _, c in off.store.candidates()]
        calls = off.store.llm_totals()["calls"]
    with start_run(validate(novelty_config(threshold=0.01)), tmp_path / "on", llm=VerdictLLM("yes")) as on:
        on.run()
        assert [c.to_dict() for _, c in on.store.candidates()] == expected
        checks = on.store.novelty_checks()
        assert checks and {c["outcome"] for c in checks} == {"novel"}
        assert on.store.llm_totals()["calls"] == calls + len(checks)


def test_at_the_default_threshold_the_scripted_children_meet_no_judge(tmp_path: Path) -> None:
    """The scripted heuristics differ from the seed far more than a 0.99 cosine allows."""
    with start_run(validate(novelty_config()), tmp_path, llm=VerdictLLM("no")) as runner:
        runner.run_step()
        assert runner.store.novelty_checks() == [] and runner.store.llm_totals(JUDGE)["calls"] == 0
        assert len(runner.store.embeddings()) == len({c.key for _, c in runner.store.candidates() if c.code})


def test_the_report_counts_judged_and_rejected_children_and_the_judges_tokens(tmp_path: Path) -> None:
    with start_run(validate({**novelty_config(threshold=0.97), "budget": 20}), tmp_path) as runner:
        runner.run()
        store = runner.store
        counts, judge = store.novelty_counts(), store.llm_totals(JUDGE)
        assert counts["rejected"] and counts["novel"] and counts["resampled"], counts
        not_novel = [c for _, c in store.candidates() if c.reason and c.reason.startswith("not novel")]
        assert len(not_novel) == counts["rejected"]
        assert summary(store)["evaluations"] == 20 and len(store.candidates()) == 20 + counts["rejected"]
        page = render_report(store)
    judged = f"{counts['novel']} / {counts['resampled']} / {counts['rejected']}"
    assert f"<td>novelty: children judged (novel / resampled / rejected, never evaluated)</td><td>{judged}</td>" in page
    tokens = f"{judge['calls']}, {judge['prompt_tokens']} / {judge['completion_tokens']}"
    assert f"<td>novelty judge: calls, tokens (prompt / completion)</td><td>{tokens}</td>" in page


@pytest.mark.parametrize("method", ["eoh", "eoh+es"])
def test_a_resumed_run_ends_as_an_uninterrupted_one_and_embeds_nothing_twice(tmp_path: Path, method: str) -> None:
    config = validate({**novelty_config(threshold=0.97), "method": method})
    with start_run(config, tmp_path / "straight") as straight:
        straight.run()
        expected = straight.store.last_state()
        expected_checks = [{k: v for k, v in c.items() if k != "id"} for c in straight.store.novelty_checks()]
        expected_calls = straight.store.llm_totals()
    assert {c["outcome"] for c in expected_checks} == {"novel", "resampled", "rejected"}
    interrupted = start_run(config, tmp_path / "resumed")
    for _ in range(3):
        interrupted.run_step()
    interrupted.close()
    kept = RunStore.open(tmp_path / "resumed").embeddings()
    fake_embedder.EMBEDDED.clear()
    with resume_run(tmp_path / "resumed") as resumed:
        resumed.run()
        actual = resumed.store.last_state()
        actual_checks = [{k: v for k, v in c.items() if k != "id"} for c in resumed.store.novelty_checks()]
        actual_calls = resumed.store.llm_totals()
    assert not {code_key(text) for text in fake_embedder.EMBEDDED} & kept.keys(), "a kept vector was recomputed"
    assert actual_checks == expected_checks and actual_calls == expected_calls
    for key in ("population", "best", "rng", "evaluations", "weights_sha256"):
        assert actual[key] == expected[key], key


def test_sigkill_then_resume_matches_an_uninterrupted_run_with_the_check_on(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text(
        'method = "eoh+es"\ntask = "tsp_construct"\nmodel = "scripted_llm:build"\nbudget = 34\nseed = 5\n'
        "population_size = 4\n[eval]\nlimit = 4\nworkers = 1\n[es]\nsigma = 0.05\nalpha = 0.05\n"
        f'[novelty]\nenabled = true\nthreshold = 0.97\nembedder = "{TRIGRAMS}"\n'
    )
    straight = tmp_path / "straight"
    assert coevo("run", str(config), "--run-dir", str(straight)).returncode == 0
    expected = show(straight)
    interrupted = tmp_path / "interrupted"
    kills = kill_after(coevo("run", str(config), "--run-dir", str(interrupted), wait=False), interrupted, 2, 0.1)
    kills += kill_after(coevo("resume", str(interrupted), wait=False), interrupted, 4, 0.05)
    assert kills >= 1
    assert coevo("resume", str(interrupted)).returncode == 0
    actual = show(interrupted)
    for key in ("status", "evaluations", "weights_sha256", "best", "llm_calls"):
        assert actual[key] == expected[key], key
    counts = [RunStore.open(run).novelty_counts() for run in (straight, interrupted)]
    assert counts[0] == counts[1] and counts[0]["rejected"]


def test_es_members_written_on_workers_cannot_be_checked(tmp_path: Path) -> None:
    class Workers:
        """An executor that writes ES members on its own side, as Ray's does."""

        def close(self) -> None: ...

    config = validate({**novelty_config(), "method": "eoh+es"})
    store = RunStore.create(tmp_path, config.model_dump(mode="json"))
    with pytest.raises(ConfigError, match="no novelty check runs; run with the local executor"):
        Runner(config, store, tmp_path, ScriptedLLM(), executor=Workers())
    store.close()


# --- the default embedder -------------------------------------------------------------------------------

NEAREST_NEIGHBOUR = """import numpy as np


def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    nodes = np.fromiter(unvisited_nodes, dtype=np.int64)
    return int(nodes[np.argmin(distance_matrix[current_node, nodes])])
"""


def cosines(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit @ unit.T


def test_a_run_with_a_transformers_model_embeds_with_that_model_itself(one_torch_thread) -> None:
    from tiny_lm import build_tiny_llama, build_tiny_tokenizer

    from coevo.llm.embedding import HiddenStateEmbedder
    from coevo.llm.hf import HFBackend

    tokenizer = build_tiny_tokenizer()
    backend = HFBackend(build_tiny_llama(tokenizer.vocab_size), tokenizer, name="tiny")
    embedder = HiddenStateEmbedder.from_config(validate({**BASE, "method": "eoh"}), backend)
    assert embedder.model is backend.model and embedder.name == "hidden-states:tiny"
    texts = ["the cat sat on the mat", "a dog ran in the park"]
    together = embedder.embed(texts)
    assert together.shape == (2, backend.model.config.hidden_size) and together.dtype == np.float32
    assert np.array_equal(together[1], embedder.embed(texts[1:])[0]), "a text's vector does not depend on the others"


def test_the_embedded_models_hidden_states_rank_a_retuned_copy_above_other_programs() -> None:
    """The real smollm2-135m, loaded by the fallback for a run whose LLM holds no transformers model."""
    from coevo.llm.embedding import HiddenStateEmbedder
    from tasks import get_task

    embedder = HiddenStateEmbedder.from_config(validate({**BASE, "method": "eoh"}), ScriptedLLM())
    assert embedder.name == "hidden-states:smollm2-135m"
    seed = get_task("tsp_construct").seed_code()
    retuned = seed.replace("0.4 * distance_matrix", "0.45 * distance_matrix")
    assert retuned != seed
    similar = cosines(embedder.embed([seed, retuned, NEAREST_NEIGHBOUR, get_task("bpp_online").seed_code()]))
    near, different = similar[0, 1], [similar[0, 2], similar[0, 3], similar[1, 2], similar[1, 3], similar[2, 3]]
    assert near > max(different)
    assert near >= 0.99 > max(different), "the default threshold separates them"


# --- the settings ---------------------------------------------------------------------------------------


def test_the_check_is_off_by_default_at_shinkas_settings() -> None:
    novelty = validate({**BASE, "method": "eoh"}).novelty
    assert (novelty.enabled, novelty.threshold, novelty.tries, novelty.embedder) == (False, 0.99, 3, "hidden-states")


@pytest.mark.parametrize(
    ("novelty", "message"),
    [
        ({"threshold": 0}, "config key 'novelty.threshold': Input should be greater than 0"),
        ({"threshold": 1.5}, "config key 'novelty.threshold': Input should be less than or equal to 1"),
        ({"tries": 0}, "config key 'novelty.tries': Input should be greater than or equal to 1"),
        ({"embedder": "sentences"}, "unknown embedder 'sentences'; known embedders: hidden-states"),
        ({"embedder": "nowhere.py:Embedder"}, "embedder 'nowhere.py:Embedder'"),
        ({"judge": "yes"}, "unknown config key 'novelty.judge'"),
    ],
)
def test_bad_novelty_settings_fail_with_one_line(novelty: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        validate({**BASE, "method": "eoh", "novelty": novelty})
    assert "\n" not in str(raised.value)


def test_an_agent_run_cannot_check_novelty() -> None:
    agent = {
        "method": "es",
        "model": "scripted_llm:build",
        "budget": 4,
        "workload": {"kind": "agent", "env": "gridnav"},
    }
    with pytest.raises(ConfigError, match="novelty.enabled checks the code of heuristics, which the agent workload"):
        validate({**agent, "novelty": {"enabled": True}})
