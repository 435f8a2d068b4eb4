"""Diff edits: SEARCH/REPLACE blocks read and applied exactly, the peers' failure modes, the resample and
fallback path of the operators, the setting, and what the run store records."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from coevo.llm.base import Completion, Message, SamplingParams
from coevo.operators import BudgetLedger, EoHOperators, Parent, Proposal, ProposalRequest, Rejection
from coevo.operators.diff_edit import DIFF_OPERATORS, EditPolicy, apply_blocks, parse_blocks
from coevo.operators.parsing import ParseFailure
from coevo.run.config import ConfigError, validate
from coevo.run.report import render_report
from coevo.run.session import start_run
from coevo.run.store import DB_NAME, RunStore

PARENT_CODE = textwrap.dedent(
    """\
    import numpy as np


    def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
        nodes = np.fromiter(unvisited_nodes, dtype=np.int64)
        score = distance_matrix[current_node, nodes]
        if len(nodes) > 3:
            score = score + 0.1 * distance_matrix[destination_node, nodes]
            score = score - 0.05
        return int(nodes[np.argmin(score)])"""
)


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def applied(answer: str, code: str = PARENT_CODE) -> str | ParseFailure:
    read = parse_blocks(answer)
    return read if isinstance(read, ParseFailure) else apply_blocks(code, read[0])


# --- reading and applying blocks ------------------------------------------------------------------


def test_a_block_that_copies_the_parent_exactly_replaces_those_lines():
    answer = "Weigh the destination more.\n" + block(
        "        score = score + 0.1 * distance_matrix[destination_node, nodes]",
        "        score = score + 0.4 * distance_matrix[destination_node, nodes]",
    )
    assert applied(answer) == PARENT_CODE.replace("0.1 *", "0.4 *")
    blocks, prose = parse_blocks(answer)
    assert len(blocks) == 1 and prose.strip() == "Weigh the destination more."


def test_several_blocks_apply_in_order_each_to_the_code_the_previous_left():
    line = "    score = {}distance_matrix[current_node, nodes]"
    first = block(line.format(""), line.format("2 * "))
    second = block(line.format("2 * "), line.format("3 * "))
    assert applied(f"{first}\n\n{second}") == PARENT_CODE.replace("score = distance", "score = 3 * distance")
    assert isinstance(applied(f"{second}\n\n{first}"), ParseFailure), "the second block only matches after the first"


def test_trailing_whitespace_on_either_side_does_not_stop_a_match():
    answer = block("        score = score - 0.05   \t", "        score = score - 0.5")
    assert applied(answer) == PARENT_CODE.replace("- 0.05", "- 0.5")
    padded_parent = PARENT_CODE.replace("score - 0.05", "score - 0.05  ")
    unpadded = block("        score = score - 0.05", "        score = score - 0.5")
    assert applied(unpadded, padded_parent) == PARENT_CODE.replace("- 0.05", "- 0.5")


@pytest.mark.parametrize("indent", ["", "  ", "    ", "            "], ids=["col0", "col2", "col4", "col12"])
def test_a_consistently_shifted_search_matches_and_its_replace_lands_at_the_parents_indentation(indent: str):
    """The parent's lines sit at column 8 inside an `if`; the model's copy sits at any other column."""
    search = f"{indent}score = score + 0.1 * distance_matrix[destination_node, nodes]\n{indent}score = score - 0.05"
    replace = (
        f"{indent}if current_node != destination_node:\n"
        f"{indent}    score = score + 0.2 * distance_matrix[destination_node, nodes]\n"
        f"{indent}score = score - 0.07"
    )
    expected = PARENT_CODE.replace(
        "        score = score + 0.1 * distance_matrix[destination_node, nodes]\n        score = score - 0.05",
        "        if current_node != destination_node:\n"
        "            score = score + 0.2 * distance_matrix[destination_node, nodes]\n"
        "        score = score - 0.07",
    )
    assert applied(block(search, replace)) == expected


def test_a_search_whose_relative_indentation_differs_does_not_match():
    search = "        score = score + 0.1 * distance_matrix[destination_node, nodes]\n    score = score - 0.05"
    assert applied(block(search, "        pass")) == ParseFailure("SEARCH block 1 matches no part of the code")


def test_a_search_found_nowhere_fails_naming_the_block():
    good = block("        score = score - 0.05", "        score = score - 0.5")
    missing = block("    return nodes[0]", "    return nodes[-1]")
    assert applied(f"{good}\n{missing}") == ParseFailure("SEARCH block 2 matches no part of the code")


def test_a_search_found_twice_is_ambiguous():
    code = "def f(x):\n    y = x + 1\n    if y:\n        y = x + 1\n    return y"
    result = applied(block("y = x + 1", "y = x + 2"), code)
    assert result == ParseFailure("SEARCH block 1 matches 2 places (lines 2, 4); it must match one")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("I would weigh the destination more.", "no SEARCH/REPLACE block in the answer"),
        (block("", "    x = 1"), "SEARCH block 1 is empty"),
        (block("        score = score - 0.05", "        score = score - 0.05"), "the blocks leave the code as it was"),
        (block("        score = score - 0.05", "x") + "\n<<<<<<< SEARCH\n    return 1", "a SEARCH block is not closed"),
    ],
)
def test_answers_without_a_usable_edit_fail_with_a_reason(answer: str, reason: str):
    result = applied(answer)
    assert isinstance(result, ParseFailure) and result.reason.startswith(reason)


def test_only_mutations_ask_for_diffs_with_the_chosen_probability():
    policy = EditPolicy(diff=0.6)
    keys = [f"7:{index}" for index in range(2000)]
    share = sum(policy.asks_diff("m1", key) for key in keys) / len(keys)
    assert 0.56 < share < 0.64
    assert [policy.asks_diff("m2", key) for key in keys] == [policy.asks_diff("m2", key) for key in keys]
    assert not any(policy.asks_diff(operator, key) for operator in ("i1", "e1", "e2", "tune") for key in keys[:50])
    assert DIFF_OPERATORS == {"m1", "m2"}
    assert not any(EditPolicy().asks_diff("m1", key) for key in keys)
    assert all(EditPolicy(diff=1.0).asks_diff("m1", key) for key in keys)


# --- the operators: resample, then fall back ------------------------------------------------------

PARENT = Parent("hash-p", "Nearest with a pull towards the destination.", PARENT_CODE, 6.0)
GOOD_DIFF = "Pull harder.\n" + block(
    "score = score + 0.1 * distance_matrix[destination_node, nodes]",
    "score = score + 0.3 * distance_matrix[destination_node, nodes]",
)
BAD_DIFF = "Pull harder.\n" + block("    score = 0.1 * score", "    score = 0.3 * score")
FULL = """{Plain nearest neighbour.}
```python
def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    return min(unvisited_nodes, key=lambda n: distance_matrix[current_node][n])
```"""


class ScriptLLM:
    """Answers each request by a rule on its messages; notes every call's requests and sampling."""

    name = "script"

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls: list[tuple[list[list[Message]], SamplingParams]] = []

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        self.calls.append(([list(r) for r in requests], sampling))
        return [Completion(self.answer(list(r)), 10, 10, 0.0, "stop") for r in requests]


class ToyTask:
    function_name = "select_next_node"
    signature = "select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix) -> int"
    description = "Build a short travelling-salesman tour one city at a time."
    sense = "min"


def diff_operators(answer, resamples: int = 3) -> tuple[EoHOperators, ScriptLLM, BudgetLedger]:
    llm, ledger = ScriptLLM(answer), BudgetLedger()
    sampling = SamplingParams(seed=11)
    return EoHOperators(llm, ToyTask(), ledger, sampling=sampling, edits=EditPolicy(1.0, resamples)), llm, ledger


def test_a_diff_request_shows_the_format_and_its_applied_answer_is_the_patched_parent():
    ops, llm, _ = diff_operators(lambda messages: GOOD_DIFF)
    [proposal] = ops.propose("m1", [[PARENT]])
    assert isinstance(proposal, Proposal)
    assert proposal.code == PARENT_CODE.replace("0.1 *", "0.3 *") + "\n"
    assert proposal.thought == "Pull harder."
    assert proposal.edit is not None and (proposal.edit.outcome, proposal.edit.failures) == ("applied", ())
    user = llm.calls[0][0][0][-1]["content"]
    assert "<<<<<<< SEARCH" in user and "in a single ```python block" not in user
    assert EoHOperators(llm, ToyTask(), BudgetLedger()).build_prompt("m1", [PARENT])[-1]["content"] != user


def test_a_failed_diff_is_asked_again_with_its_reason_under_a_new_seed():
    ops, llm, ledger = diff_operators(lambda messages: GOOD_DIFF if len(messages) > 2 else BAD_DIFF)
    [proposal] = ops.propose("m2", [[PARENT]])
    assert isinstance(proposal, Proposal) and proposal.edit.outcome == "applied"
    [failure] = proposal.edit.failures
    assert failure.reason == "SEARCH block 1 matches no part of the code" and failure.completion.text == BAD_DIFF
    (first, first_sampling), (again, again_sampling) = llm.calls
    assert again[0][:2] == first[0] and again[0][2] == {"role": "assistant", "content": BAD_DIFF}
    assert "matches no part of the code" in again[0][3]["content"]
    assert again_sampling.seed_for(0) != first_sampling.seed_for(0)
    assert ledger.usage(operator="m2 diff resample").requests == 1


def test_diffs_that_keep_failing_fall_back_to_a_full_rewrite():
    ops, llm, ledger = diff_operators(lambda msgs: FULL if "exact signature" in msgs[-1]["content"] else BAD_DIFF, 2)
    [proposal] = ops.propose("m1", [[PARENT]])
    assert isinstance(proposal, Proposal) and proposal.code.rstrip().endswith("distance_matrix[current_node][n])")
    assert proposal.edit.outcome == "fallback" and len(proposal.edit.failures) == 3  # the first answer and 2 resamples
    assert len(llm.calls) == 4 and "<<<<<<< SEARCH" not in llm.calls[-1][0][0][-1]["content"]
    assert ledger.usage(operator="m1 full fallback").requests == 1
    assert ledger.usage(operator="m1 diff resample").requests == 2


def test_a_diff_that_applies_but_breaks_the_function_counts_as_failed():
    no_return = "Drop the return.\n" + block("    return int(nodes[np.argmin(score)])", "    pass")
    ops, _, _ = diff_operators(lambda msgs: FULL if "exact signature" in msgs[-1]["content"] else no_return, 0)
    [proposal] = ops.propose("m1", [[PARENT]])
    assert proposal.edit.outcome == "fallback"
    [failure] = proposal.edit.failures
    assert "return" in failure.reason and failure.completion.text == no_return


def test_only_the_failed_requests_are_asked_again_each_on_its_own_stream_and_rows():
    rows_entered: list[list[int]] = []

    def rows(indices):
        rows_entered.append(list(indices))
        from contextlib import nullcontext

        return nullcontext()

    def answer(messages):
        code = messages[1]["content"]
        return BAD_DIFF if "objective 9" in code and len(messages) == 2 else GOOD_DIFF

    ops, llm, _ = diff_operators(answer)
    worse = Parent("hash-q", "Same, worse.", PARENT_CODE, 9.0)
    parents = [PARENT, worse, PARENT, worse]
    items = ops.propose_many([ProposalRequest("m1", (parent,)) for parent in parents], SamplingParams(seed=5), rows)
    assert all(isinstance(item, Proposal) for item in items)
    assert [len(item.edit.failures) for item in items] == [0, 1, 0, 1]
    assert rows_entered == [[0, 1, 2, 3], [1], [3]]
    (_, first), (_, retry_1), (_, retry_3) = llm.calls
    assert (retry_1.first_request, retry_3.first_request) == (1, 3)
    assert retry_1.seed == retry_3.seed != first.seed


def test_the_default_policy_asks_for_whole_functions_as_before():
    llm = ScriptLLM(lambda messages: FULL)
    [proposal] = EoHOperators(llm, ToyTask(), BudgetLedger()).propose("m1", [[PARENT]])
    assert isinstance(proposal, Proposal) and proposal.edit is None
    assert "<<<<<<< SEARCH" not in llm.calls[0][0][0][-1]["content"]


def test_a_rejected_full_rewrite_after_failed_diffs_keeps_its_facts():
    ops, _, _ = diff_operators(lambda messages: "no code at all", 0)
    [rejection] = ops.propose("m1", [[PARENT]])
    assert isinstance(rejection, Rejection) and rejection.reason == "no Python code found in the answer"
    assert rejection.edit.outcome == "fallback" and [f.reason for f in rejection.edit.failures] == [
        "no SEARCH/REPLACE block in the answer"
    ]


# --- the setting ------------------------------------------------------------------------------------

BASE = {"method": "eoh", "task": "tsp_construct", "model": "scripted_llm:build", "budget": 13, "seed": 3}


@pytest.mark.parametrize(
    ("edit", "diff"), [("full", 0.0), ("diff", 1.0), ({"diff": 0.6, "full": 0.4}, 0.6), ({"diff": 3, "full": 1}, 0.75)]
)
def test_the_edit_setting_becomes_the_operators_policy(edit, diff):
    config = validate({**BASE, "operators": {"edit": edit, "diff_resamples": 2}})
    assert (config.operators.diff_share, config.operators.diff_resamples) == (diff, 2)


def test_the_default_setting_is_the_full_rewrite():
    assert (validate(BASE).operators.diff_share, validate(BASE).operators.diff_resamples) == (0.0, 3)


@pytest.mark.parametrize(
    "operators",
    [{"edit": "patch"}, {"edit": {"diff": -1.0, "full": 1.0}}, {"edit": {"cross": 1.0}}, {"diff_resamples": -1}],
)
def test_bad_edit_settings_are_refused(operators):
    with pytest.raises((ConfigError, ValueError)):
        validate({**BASE, "operators": operators})


# --- a run: what the store records -------------------------------------------------------------------


def run_config(**changes):
    return validate(
        {**BASE, "population_size": 4, "eval": {"limit": 4, "workers": 1}, "es": {"sigma": 0.05, "alpha": 0.05}}
        | changes
    )


def test_a_diff_run_records_each_diff_answer_and_reports_the_counts(tmp_path: Path):
    with start_run(run_config(budget=30, operators={"edit": "diff", "diff_resamples": 0}), tmp_path) as run:
        run.run()
    store = RunStore.open(tmp_path)
    counts = store.edit_counts()
    assert counts["applied"] > 0 and counts["failed"] > 0
    assert counts["fallback"] == counts["failed"], "with no resamples every failed diff falls back"
    calls = store.llm_calls()
    failed = [call for call in calls if call["edit"] == "failed"]
    assert all(call["outcome"].startswith("rejected: ") for call in failed)
    linked = {row[0] for row in store._db.execute("SELECT llm_call FROM candidates WHERE llm_call IS NOT NULL")}
    assert not linked & {call["id"] for call in failed}, "candidates link to the answer they came from"
    assert {call["edit"] for call in calls if call["operator"] in ("i1", "e1", "e2")} == {None}
    applied, failed_count, fallback = counts["applied"], counts["failed"], counts["fallback"]
    counted = f"{applied} / {failed_count} / {fallback}"
    row = f"<tr><td>diff answers (applied / failed / fallback)</td><td>{counted}</td></tr>"
    assert row in render_report(store)


def test_lowrank_members_resample_their_diffs_under_their_own_weights(tmp_path: Path):
    """Answers do not depend on how the members were batched, retries included: a retry of member i
    runs under member i's perturbation and on member i's sampling stream."""
    lowrank = {"sigma": 0.05, "alpha": 0.05, "rank": 1, "scope": "all_linear"}
    answers = []
    for batch in (1, 4):
        batching = {"es": lowrank, "llm": {"max_batch_size": batch}}
        config = run_config(method="eoh+es", budget=30, operators={"edit": "diff"}, **batching)
        with start_run(config, tmp_path / str(batch)) as run:
            run.run()
            answers.append([(call["weights"], call["response"], call["edit"]) for call in run.store.llm_calls()])
    edits = [edit for *_, edit in answers[0]]
    assert edits.count("failed") and edits.count("applied")
    assert answers[0] == answers[1]


def test_an_older_store_gains_the_edit_column_on_open(tmp_path: Path):
    RunStore.create(tmp_path, {"method": "eoh"}).close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("ALTER TABLE llm_calls DROP COLUMN edit")
    store = RunStore.open(tmp_path)
    assert store.edit_counts() == {"applied": 0, "failed": 0, "fallback": 0}
    assert json.loads(store.meta("config")) == {"method": "eoh"}
