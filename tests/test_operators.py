"""Operators end to end against a fake LLM: prompts, parsing into proposals, ledger, dedupe, DSPy."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence

import pytest

from coevo.llm.base import Completion, Message, SamplingParams
from coevo.operators import (
    EOH_OPERATORS,
    BudgetLedger,
    ComponentRewriter,
    EoHOperators,
    Parent,
    PromptTemplates,
    Proposal,
    Reflector,
    Rejection,
    TextProposal,
    code_fingerprint,
    default_templates,
)
from tasks import get_task

GOOD_ANSWER = """{Go to the nearest unvisited node, nudged towards the destination.}
```python
def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    return min(unvisited_nodes, key=lambda n: distance_matrix[current_node][n] + 0.1 * distance_matrix[n][destination_node])
```"""  # noqa: E501


@dataclasses.dataclass(frozen=True)
class ToyTask:
    function_name: str = "select_next_node"
    signature: str = "select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix) -> int"
    description: str = "Build a short travelling-salesman tour one city at a time."
    sense: str = "min"


class FakeLLM:
    """Returns canned answers in turn; counts a token per word so the ledger totals are checkable."""

    def __init__(self, answers: Sequence[str], finish_reason: str = "stop", name: str = "fake") -> None:
        self.name = name
        self._answers = list(answers)
        self._finish_reason = finish_reason
        self.calls: list[list[list[Message]]] = []

    def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
        self.calls.append([list(r) for r in requests])
        completions = []
        for index, request in enumerate(requests):
            text = self._answers[(len(self.calls) - 1 + index) % len(self._answers)]
            prompt_tokens = sum(len(m["content"].split()) for m in request)
            completions.append(Completion(text, prompt_tokens, len(text.split()), 0.01, self._finish_reason))
        return completions


PARENT_A = Parent(
    "hash-a", "Nearest neighbour.", "def select_next_node(c, d, u, m):\n    return min(u, key=lambda n: m[c][n])", 7.5
)
PARENT_B = Parent(
    "hash-b", "Farthest first.", "def select_next_node(c, d, u, m):\n    return max(u, key=lambda n: m[c][n])", 9.0
)
PARENTS_FOR = {"i1": (), "e1": (PARENT_A, PARENT_B), "e2": (PARENT_A, PARENT_B), "m1": (PARENT_A,), "m2": (PARENT_B,)}


def operators(llm: FakeLLM, ledger: BudgetLedger | None = None) -> EoHOperators:
    return EoHOperators(llm=llm, task=ToyTask(), ledger=ledger or BudgetLedger())


@pytest.mark.parametrize("operator", EOH_OPERATORS)
def test_prompt_holds_task_signature_instruction_and_parents(operator: str) -> None:
    templates = default_templates()
    prompt = operators(FakeLLM([GOOD_ANSWER])).build_prompt(operator, PARENTS_FOR[operator])
    user = prompt[-1]["content"]
    assert prompt[0]["role"] == "system" and prompt[-1]["role"] == "user"
    assert ToyTask.description in user
    assert "def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix) -> int" in user
    assert templates[operator] in user
    for parent in PARENTS_FOR[operator]:
        assert parent.thought in user and parent.code in user and f"{parent.objective:.6g}" in user
    for parent in {PARENT_A, PARENT_B} - set(PARENTS_FOR[operator]):
        assert parent.code not in user


def test_hints_appear_in_the_prompt_only_when_given() -> None:
    ops = operators(FakeLLM([GOOD_ANSWER]))
    assert "Hints from earlier attempts" not in ops.build_prompt("m1", [PARENT_A])[-1]["content"]
    hinted = ops.build_prompt("m1", [PARENT_A], hints="Penalise long detours.")[-1]["content"]
    assert "Hints from earlier attempts:\nPenalise long detours." in hinted


@pytest.mark.parametrize(("operator", "parents"), [("i1", [PARENT_A]), ("e1", [PARENT_A]), ("m2", []), ("x9", [])])
def test_wrong_operator_or_parent_count_is_a_clear_error(operator: str, parents: list[Parent]) -> None:
    with pytest.raises(ValueError, match=operator):
        operators(FakeLLM([GOOD_ANSWER])).build_prompt(operator, parents)


def test_task_whose_signature_disagrees_with_its_function_name_is_refused() -> None:
    with pytest.raises(ValueError, match="function_name"):
        EoHOperators(FakeLLM([GOOD_ANSWER]), ToyTask(function_name="other"), BudgetLedger())


@pytest.mark.parametrize("operator", EOH_OPERATORS)
def test_each_operator_end_to_end_to_a_parsed_proposal(operator: str) -> None:
    llm = FakeLLM([GOOD_ANSWER])
    [proposal] = operators(llm).propose(operator, [PARENTS_FOR[operator]])
    assert isinstance(proposal, Proposal)
    assert proposal.operator == operator
    assert proposal.parents == tuple(p.key for p in PARENTS_FOR[operator])
    assert proposal.thought == "Go to the nearest unvisited node, nudged towards the destination."
    assert proposal.code.startswith("def select_next_node(") and "0.1 * distance_matrix" in proposal.code
    assert proposal.prompt == llm.calls[0][0]
    assert proposal.completion.text == GOOD_ANSWER


def test_real_task_drives_the_operators() -> None:
    task = get_task("tsp_construct")
    ops = EoHOperators(FakeLLM([GOOD_ANSWER]), task, BudgetLedger())
    assert task.description in ops.build_prompt("i1", [])[-1]["content"]
    assert isinstance(ops.propose("i1", [()])[0], Proposal)


def test_unusable_answers_come_back_as_rejections_with_reasons() -> None:
    no_code = FakeLLM(["I would use nearest neighbour."])
    [rejection] = operators(no_code).propose("m1", [[PARENT_A]])
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "no Python code found in the answer" and rejection.parents == ("hash-a",)

    failed = FakeLLM(["connection reset by peer\ntraceback..."], finish_reason="error")
    [rejection] = operators(failed).propose("i1", [()])
    assert isinstance(rejection, Rejection) and rejection.reason == "LLM error: connection reset by peer"

    cut = FakeLLM(["{Idea here.}\n```python\ndef select_next_node(a, b, c, d):\n    x = 1\n"], finish_reason="length")
    [rejection] = operators(cut).propose("i1", [()])
    assert isinstance(rejection, Rejection) and "token limit" in rejection.reason


def test_batched_proposals_use_one_call_and_the_ledger_counts_it() -> None:
    no_code = "no code at all"
    llm = FakeLLM([GOOD_ANSWER, no_code])
    ledger = BudgetLedger()
    results = operators(llm, ledger).propose("m1", [[PARENT_A], [PARENT_B], [PARENT_A]])
    assert len(llm.calls) == 1 and len(llm.calls[0]) == 3
    assert [type(r) for r in results] == [Proposal, Rejection, Proposal]
    usage = ledger.usage(backend="fake", operator="m1")
    assert (usage.calls, usage.requests) == (1, 3)
    assert usage.prompt_tokens == sum(r.completion.prompt_tokens for r in results) > 0
    assert usage.completion_tokens == 2 * len(GOOD_ANSWER.split()) + len(no_code.split())
    assert usage.wall_seconds >= 0.0
    operators(llm, ledger).propose("i1", [()])
    assert ledger.usage(operator="m1").calls == 1 and ledger.usage().calls == 2


def test_ledger_is_thread_safe_and_round_trips_through_json() -> None:
    ledger = BudgetLedger()
    completion = Completion("x", 10, 3, 0.1, "stop")

    def hammer() -> None:
        for _ in range(200):
            ledger.record("hf", "e2", [completion, completion], 0.5)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    usage = ledger.usage()
    assert (usage.calls, usage.requests, usage.prompt_tokens, usage.completion_tokens) == (1600, 3200, 32000, 9600)
    restored = BudgetLedger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert restored.to_dict() == ledger.to_dict()
    with pytest.raises(ValueError, match="unknown field"):
        BudgetLedger.from_dict({"hf": {"e2": {"dollars": 1}}})


def test_ledger_refuses_a_backend_that_drops_requests() -> None:
    class Lossy(FakeLLM):
        def generate(self, requests: Sequence[Sequence[Message]], sampling: SamplingParams) -> list[Completion]:
            return super().generate(requests, sampling)[:-1]

    with pytest.raises(RuntimeError, match="returned 1 completions for 2 requests"):
        operators(Lossy([GOOD_ANSWER])).propose("i1", [(), ()])


def test_evolved_templates_change_the_prompt_and_must_keep_placeholders() -> None:
    ops = operators(FakeLLM([GOOD_ANSWER]))
    evolved = ops.templates.with_component("m1", "Make $function_name faster to compute.")
    prompt = dataclasses.replace(ops, templates=evolved).build_prompt("m1", [PARENT_A])[-1]["content"]
    assert "Make select_next_node faster to compute." in prompt
    with pytest.raises(ValueError, match=r"must keep placeholder\(s\) \$signature"):
        ops.templates.with_component("output_format", "Write the code.")
    with pytest.raises(ValueError, match=r"unknown placeholder\(s\) \$budget"):
        ops.templates.with_component("i1", "Spend $budget tokens.")
    assert PromptTemplates(evolved.to_dict()) == evolved


def test_short_reflection_shows_the_better_parent_first_and_cleans_the_hint() -> None:
    llm = FakeLLM(['Hint: "Prefer nearby nodes; never jump to the farthest one."'])
    reflector = Reflector(llm, ToyTask(), BudgetLedger())
    [hint] = reflector.short([(PARENT_B, PARENT_A)])
    user = llm.calls[0][0][-1]["content"]
    assert user.index(PARENT_A.code) < user.index(PARENT_B.code)
    assert isinstance(hint, TextProposal) and hint.text == "Prefer nearby nodes; never jump to the farthest one."
    assert hint.parents == ("hash-b", "hash-a")
    with pytest.raises(ValueError, match="objective is None"):
        reflector.short([(PARENT_A, dataclasses.replace(PARENT_B, objective=None))])


def test_long_reflection_accumulates_previous_advice_and_recent_hints() -> None:
    llm = FakeLLM(["Keep tours local and look one step ahead."])
    ledger = BudgetLedger()
    advice = Reflector(llm, ToyTask(), ledger).long("Prefer short edges.", ["Look ahead.", "Avoid detours."])
    user = llm.calls[0][0][-1]["content"]
    assert "Prefer short edges." in user and "- Look ahead.\n- Avoid detours." in user
    assert isinstance(advice, TextProposal) and advice.text == "Keep tours local and look one step ahead."
    assert ledger.usage(operator="reflect_long").calls == 1


def test_component_rewrite_keeps_placeholders_or_is_rejected() -> None:
    templates = default_templates()
    good = "```\nState the idea in braces, then write `$signature` in a python block.\n```"
    bad = "```\nState the idea, then write the function.\n```"
    llm = FakeLLM([good, bad])
    results = ComponentRewriter(llm, BudgetLedger()).rewrite(
        templates, "output_format", ["3 of 8 answers had no braces around the idea"], samples=2
    )
    assert "Keep these placeholders exactly as written: $signature" in llm.calls[0][0][-1]["content"]
    assert "3 of 8 answers had no braces" in llm.calls[0][0][-1]["content"]
    accepted, rejected = results
    assert isinstance(accepted, TextProposal)
    assert templates.with_component("output_format", accepted.text)["output_format"] == accepted.text
    assert isinstance(rejected, Rejection) and "$signature" in rejected.reason


REFERENCE = """import numpy as np

def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    nodes = np.array(sorted(unvisited_nodes))
    scores = distance_matrix[current_node, nodes] + 0.1 * distance_matrix[destination_node, nodes]
    return int(nodes[np.argmin(scores)])
"""

SAME_LOGIC = {
    "reformatted": """import numpy as np
def select_next_node(current_node,destination_node,
                     unvisited_nodes,distance_matrix):
    nodes=np.array(sorted(unvisited_nodes))
    scores=(distance_matrix[current_node,nodes]+0.1*distance_matrix[destination_node,nodes])
    return int(nodes[np.argmin(scores)])
""",
    "renamed and commented": """import numpy as np

def select_next_node(cur, dest, todo, dist):
    \"\"\"Nearest node with a pull home.\"\"\"
    # candidate cities, sorted for determinism
    cities = np.array(sorted(todo))
    s = dist[cur, cities] + 0.1 * dist[dest, cities]  # weighted
    return int(cities[np.argmin(s)])
""",
    "annotated": REFERENCE.replace("distance_matrix):", "distance_matrix: np.ndarray) -> int:"),
}

DIFFERENT_LOGIC = {
    "other weight": REFERENCE.replace("0.1 *", "0.2 *"),
    "argmax": REFERENCE.replace("np.argmin", "np.argmax"),
    "other operator": REFERENCE.replace("] + 0.1", "] - 0.1"),
}


@pytest.mark.parametrize("name", SAME_LOGIC)
def test_dedupe_treats_cosmetic_copies_as_equal(name: str) -> None:
    assert code_fingerprint(SAME_LOGIC[name]) == code_fingerprint(REFERENCE)


@pytest.mark.parametrize("name", DIFFERENT_LOGIC)
def test_dedupe_tells_different_logic_apart(name: str) -> None:
    assert code_fingerprint(DIFFERENT_LOGIC[name]) != code_fingerprint(REFERENCE)


def test_code_that_does_not_parse_has_no_fingerprint() -> None:
    with pytest.raises(ValueError, match="does not parse"):
        code_fingerprint("def broken(:")


def test_dspy_rewriter_runs_with_a_dummy_lm() -> None:
    dspy = pytest.importorskip("dspy", reason="the dspy extra is not installed")
    from dspy.utils import DummyLM

    from coevo.operators.dspy_rewriter import InstructionRewriter, rewrite_component

    new_text = "Describe the idea inside braces, then implement `$signature`."
    lm = DummyLM([{"new_instruction": new_text}, {"new_instruction": "Write the code."}])
    with dspy.context(lm=lm):
        prediction = InstructionRewriter()(
            current_instruction="Write `$signature`.", feedback=["answers lacked the braced idea"]
        )
        assert prediction.new_instruction == new_text
        with pytest.raises(ValueError, match=r"\$signature"):
            rewrite_component("output_format", "Write `$signature`.", ["too vague"])
    sent = lm.history[0]["messages"][-1]["content"]
    assert "Write `$signature`." in sent and "- answers lacked the braced idea" in sent
