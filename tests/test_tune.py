"""The tune operator: a parent's numeric parameters out, the model's new values spliced back in."""

from __future__ import annotations

import re

import pytest
from test_operators import FakeLLM, ToyTask

from coevo.operators import BudgetLedger, EoHOperators, Parent, ParseFailure, Proposal, ProposalRequest, Rejection
from coevo.operators.constants import parse_values, tunable_values, with_values
from tasks import get_task

WEIGHTED = '''import numpy as np


def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    nodes = np.fromiter(unvisited_nodes, dtype=np.int64)  # 2 and 0.0 are not parameters
    score = 0.7 * distance_matrix[current_node, nodes] - 2.5e-1 * distance_matrix[destination_node, nodes]
    return int(nodes[np.argmin(score + 0.0 * nodes[::2])])
'''
PARENT = Parent("hash-w", "Near now, away from home.", WEIGHTED, 6.5)


def test_only_nonzero_float_literals_are_parameters() -> None:
    assert tunable_values(WEIGHTED) == [0.7, 0.25]
    assert tunable_values(get_task("tsp_construct").seed_code()) == [0.4, 0.3, 0.2, 0.1]
    assert tunable_values("def f(x):\n    return x[1] + 3 + 0x1F + 2j\n") == []


def test_new_values_replace_old_ones_and_leave_everything_else() -> None:
    changed = with_values(WEIGHTED, [0.9, -0.5])
    assert tunable_values(changed) == [0.9, 0.5]  # the negative value is parenthesised: -(0.5) reads back as 0.5
    assert "0.9 * distance_matrix[current_node, nodes] - (-0.5) * distance_matrix" in changed
    assert "# 2 and 0.0 are not parameters" in changed and "0.0 * nodes[::2]" in changed
    assert with_values(WEIGHTED, [0.7, 0.25]).replace("0.25", "2.5e-1") == WEIGHTED
    with pytest.raises(ValueError, match="2 tunable values, got 1"):
        with_values(WEIGHTED, [1.0])


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("[0.8, 0.2]", [0.8, 0.2]),
        ("The old list [0.7, 0.25] becomes [0.75, -1e-1].", [0.75, -0.1]),
        ("[0.8, 0.2, 0.1]", None),
        ("[0.8, nan]", None),
        ("Sure! Here are better weights.", None),
    ],
)
def test_answers_are_read_as_the_last_list_of_the_right_length(answer: str, expected: list[float] | None) -> None:
    parsed = parse_values(answer, 2)
    if expected is None:
        assert isinstance(parsed, ParseFailure) and "2 numbers" in parsed.reason
    else:
        assert parsed == expected


def test_tune_asks_with_a_worked_example_and_splices_the_answer() -> None:
    llm = FakeLLM(["[0.8, 0.2]", "[0.7, 0.25]", "no numbers here"])
    ops = EoHOperators(llm, ToyTask(), BudgetLedger())
    good, same, prose = ops.propose_many([ProposalRequest("tune", (PARENT,))] * 3)
    prompt = llm.calls[0][0]
    assert [m["role"] for m in prompt] == ["user", "assistant", "user"]
    assert "[0.7, 0.25]" in prompt[-1]["content"] and "def " not in prompt[-1]["content"]
    assert isinstance(good, Proposal) and good.parents == ("hash-w",)
    assert good.code == with_values(WEIGHTED, [0.8, 0.2]) and "[0.8, 0.2]" in good.thought
    assert isinstance(same, Rejection) and same.reason == "the same values as the parent"
    assert isinstance(prose, Rejection) and "expected a list of 2 numbers" in prose.reason


def test_tune_needs_a_parent_with_parameters() -> None:
    ops = EoHOperators(FakeLLM(["[1.0]"]), ToyTask(), BudgetLedger())
    bare = Parent("hash-b", "Nearest.", "def select_next_node(c, d, u, m):\n    return min(u)", 7.0)
    with pytest.raises(ValueError, match="non-zero float literals"):
        ops.build_prompt("tune", [bare])


@pytest.mark.parametrize("count", [1, 2, 4, 7])
def test_the_parse_feedback_example_has_as_many_numbers_as_it_asks_for(count: int) -> None:
    failure = parse_values("no numbers here", count)
    assert isinstance(failure, ParseFailure)
    asked, example = re.fullmatch(r"expected a list of (\d+) numbers like \[(.*)\]", failure.reason).groups()
    assert int(asked) == len(example.split(", ")) == count
