"""The `skills` method on an AHD task (tsp_construct): code skills gated in the sandbox, linked into
the heuristics that call them, credited against their absence, and lessons learned from failed children."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.evaluate.evaluator import Evaluator
from coevo.llm.base import Completion
from coevo.llm.ledger import BudgetLedger
from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
from coevo.run.config import RunConfig, validate
from coevo.run.session import resume_run, start_run
from coevo.skills import Library, Skill, load_library, save_library
from coevo.skills.code_skills import SandboxTests, helpers_source
from coevo.skills.pinning import RUN_LIBRARY_DIR
from tasks import get_task

HELPER = """import numpy as np


def closest_of(row, nodes):
    nodes = np.fromiter(nodes, dtype=np.int64)
    return int(nodes[np.argmin(row[nodes])])
"""
BROKEN_HELPER = HELPER.replace("argmin", "argmax")
HELPER_TESTS = """def test_picks_the_closest_node():
    assert closest_of(np.array([5.0, 1.0, 3.0, 0.5]), {0, 2}) == 2
"""

USES_HELPER = """{Go to the closest city, with the library's helper.}
```python
def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    return closest_of(distance_matrix[current_node], unvisited_nodes)
```"""
WITHOUT_HELPER = """{Visit the highest-numbered city next.}
```python
def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    return max(unvisited_nodes)
```"""
LESSON = "name: prefer-near-cities\ndescription: when a tour is long\nlesson: pick the next city by distance."


def code_skill(name: str, code: str) -> Skill:
    md = f"---\nname: {name}\ndescription: closest_of(row, nodes) returns the node of nodes nearest by row\n---\n"
    return Skill.code_skill(md + "Call it to pick the nearest node.\n", code, HELPER_TESTS)


class HelperAwareLLM:
    """Writes the task's seed when a prompt shows the lesson, else a nearest-city heuristic through
    `closest_of` when it shows that, else a poor one; answers every failure analysis with the lesson."""

    name = "helper-aware"
    supports_weights = False

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.seed = get_task("tsp_construct").seed_code()

    def generate(self, requests, sampling):
        answers = []
        for messages in requests:
            prompt = "".join(m["content"] for m in messages)
            self.prompts.append(prompt)
            if "Write one reusable lesson" in prompt:
                text = LESSON
            elif LESSON.rsplit(": ", 1)[1] in prompt:
                text = "{The hand-weighted score, as the lesson says.}\n```python\n" + self.seed + "\n```"
            else:
                text = USES_HELPER if "def closest_of(" in prompt else WITHOUT_HELPER
            answers.append(Completion(text, len(prompt) // 4, len(text) // 4, 0.0, "stop", self.name))
        return answers


class FixedAnswers:
    name = "fixed"
    supports_weights = False

    def __init__(self, *texts: str) -> None:
        self.texts = texts

    def generate(self, requests, sampling):
        return [Completion(text, 1, 1, 0.0, "stop", self.name) for text in self.texts[: len(requests)]]


def test_a_child_gets_the_helpers_it_calls_and_keeps_one_it_defines() -> None:
    own = USES_HELPER.replace("```python\n", "```python\ndef closest_of(row, nodes):\n    return min(nodes)\n\n\n")
    llm = FixedAnswers(USES_HELPER, WITHOUT_HELPER, own, USES_HELPER)
    operators = EoHOperators(llm, get_task("tsp_construct"), BudgetLedger())
    text_skill = Skill("---\nname: tip\ndescription: a text skill\n---\nBe brief.\n")
    linked = ProposalRequest("i1", helpers=helpers_source([code_skill("closest", HELPER), text_skill]))
    calling, plain, mine, unlinked = operators.propose_many([linked, linked, linked, ProposalRequest("i1")])
    assert "def closest_of(" in calling.code and "import numpy as np" in calling.code
    assert "closest_of" not in plain.code, "a helper the child does not call is left out"
    assert "return min(nodes)" in mine.code and "argmin" not in mine.code, "a child defining it keeps its own"
    assert "undefined name(s): closest_of" in unlinked.reason, "without helpers the call is refused"


def test_a_code_skills_tests_run_in_the_sandbox_and_fail_for_a_broken_helper() -> None:
    task = get_task("tsp_construct")
    with Evaluator(task, "search", limit=1, workers=1) as evaluator:
        tests = SandboxTests(evaluator, task.seed_code())
        assert tests(HELPER, HELPER_TESTS).passed
        broken = tests(BROKEN_HELPER, HELPER_TESTS)
        escaping = tests("import os\n\ndef closest_of(row, nodes):\n    return 0\n", HELPER_TESTS)
        untested = tests(HELPER, "def check():\n    pass\n")
    assert not broken.passed and "AssertionError" in broken.detail
    assert not escaping.passed and "os" in escaping.detail, "the sandbox's policy applies to helpers too"
    assert not untested.passed and untested.detail == "no test_* function"


@pytest.fixture
def starting_library(tmp_path: Path) -> Path:
    path = tmp_path / "lib"
    save_library(Library([code_skill("closest-city", HELPER), code_skill("farthest-bug", BROKEN_HELPER)]), path)
    return path


def skills_config(library: Path) -> RunConfig:
    return validate(
        {
            "task": "tsp_construct",
            "method": "skills",
            "model": "unused",
            "budget": 12,
            "seed": 3,
            "population_size": 4,
            "eval": {"limit": 4, "workers": 1},
            "settings": {"library": str(library), "analyses": 3},
        }
    )


def test_ahd_skills_gates_links_and_credits_helpers_and_learns_from_failed_children(
    tmp_path: Path, starting_library: Path
) -> None:
    llm = HelperAwareLLM()
    with start_run(skills_config(starting_library), tmp_path / "run", llm) as runner:
        runner.run()
        skills = runner.method.skills
        library, refusals = skills.library, skills.refused.refusals
        candidates = [candidate for _, candidate in runner.store.candidates()]
        calls = [call["operator"] for call in runner.store.llm_calls()]
    assert [(r.gate, r.edit.split(":")[0]) for r in refusals] == [("tests", "add code skill 'farthest-bug'")]
    assert "AssertionError" in refusals[0].reason
    assert not any("np.argmax" in p for p in llm.prompts), "a refused helper is never shown"
    assert set(library) == {"closest-city", "prefer-near-cities"}
    helper = library["closest-city"].meta
    assert helper.uses == 2 and helper.estimates == 2 and helper.credit is not None and helper.credit > 0
    linked = [c for c in candidates if "return closest_of(" in c.code]
    assert linked and all(c.code.startswith(HELPER.rstrip()) and c.valid for c in linked)
    lesson = library["prefer-near-cities"]
    assert lesson.meta.generation == 1 and len(lesson.meta.sources) >= 2, "a lesson seen in 2+ failed children"
    assert calls[3 + 4 : 3 + 4 + 5] == ["skill-analysis"] * 3 + ["m1", "m1"], "held-out child without, then with it"
    assert len(calls) == 3 + 4 + 5 + 4, "every call is recorded (3 i1, no seed); held-out children make no candidate"
    seeded = [c for index, c in enumerate(candidates) if index >= 8 and "0.4 * distance_matrix" in c.code]
    assert seeded, "generation 2 is shown the lesson that won on val, and follows it"
    assert set(load_library(tmp_path / "run" / RUN_LIBRARY_DIR)) == set(library)


def test_a_resumed_ahd_skills_run_ends_with_the_library_of_an_uninterrupted_one(
    tmp_path: Path, starting_library: Path
) -> None:
    with start_run(skills_config(starting_library), tmp_path / "whole", HelperAwareLLM()) as runner:
        runner.run()
        whole = runner.method.skills.library
    with start_run(skills_config(starting_library), tmp_path / "cut", HelperAwareLLM()) as runner:
        runner.run_step()
        runner.run_step()  # generation 1 committed, with the lesson it admitted
    with resume_run(tmp_path / "cut", HelperAwareLLM()) as runner:
        runner.run()
        resumed = runner.method.skills
    assert resumed.library.hash == whole.hash and set(whole) == {"closest-city", "prefer-near-cities"}
    assert {n: s.meta for n, s in resumed.library.items()} == {n: s.meta for n, s in whole.items()}, "credit too"
    assert [r.gate for r in resumed.refused.refusals] == ["tests"]
