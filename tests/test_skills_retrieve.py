"""Skill retrieval: each observation is shown its top-k skills by BM25 relevance, within the token budget."""

from __future__ import annotations

from pathlib import Path

from coevo.run.session import start_run
from coevo.skills import Skill, whitespace_tokens
from coevo.skills.loop import member_view
from coevo.skills.retrieve import retrieved
from coevo.skills.settings import SkillsSettings
from test_skill_credit import HARM, HarmedAgentLLM, config_with_library
from test_skills_methods import MARKER


def skill(name: str, description: str, body: str = "Do it.") -> Skill:
    return Skill(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


SKILLS = [
    skill("sudoku-rows", "fill the missing digits of a sudoku box"),
    skill("grid-goal", "walk on the grid toward the goal cell"),
    skill("goal-row", "reach the goal row first, then the goal column"),
]


def test_retrieval_ranks_by_relevance_and_leaves_out_unrelated_skills():
    observation = "You are at row 2, column 1 on the grid. The goal is at row 0, column 3."
    assert [s.name for s in retrieved(SKILLS, observation, 3)] == ["goal-row", "grid-goal"]
    assert [s.name for s in retrieved(SKILLS, observation, 1)] == ["goal-row"]
    assert [s.name for s in retrieved(SKILLS, "Fill the sudoku board: digits 1-9", 2)] == ["sudoku-rows"]
    assert retrieved(SKILLS, "nothing in common", 2) == []


def test_retrieved_text_depends_on_the_observation_and_keeps_the_budget():
    long = [skill(s.name, s.description, "word " * 40) for s in SKILLS]
    for budget in (16, 60, 120, 400):
        view, pool = member_view(long, SkillsSettings(retrieve=2, prompt_tokens=budget))
        assert pool == {s.name for s in SKILLS}
        for observation in ("the goal row of the grid", "sudoku digits", "unrelated"):
            assert whitespace_tokens(view.text_for(observation)) <= budget
    view, _ = member_view(long, SkillsSettings(retrieve=2, prompt_tokens=400))
    assert "sudoku-rows" in view.text_for("sudoku digits") and "grid-goal" not in view.text_for("sudoku digits")
    assert view.text_for("unrelated") == ""


class RecordingAgent(HarmedAgentLLM):
    def __init__(self) -> None:
        super().__init__()
        self.agent_prompts: list[str] = []

    def generate_each(self, items):
        self.agent_prompts += [messages[0]["content"] for messages, _ in items]
        return super().generate_each(items)


def test_a_run_with_retrieval_shows_each_observation_only_its_relevant_skills(tmp_path: Path):
    lessons = [
        ("step-to-goal", "when the goal is on another row or column", MARKER),
        ("sudoku-freeze", "sudoku digits", HARM),
    ]
    config = config_with_library(tmp_path, lessons, "settings.retrieve=1", "settings.show_share=1.0", "budget=2")
    agent = RecordingAgent()
    with start_run(config, tmp_path / "run", agent) as runner:
        runner.run()
    assert agent.agent_prompts and all(MARKER in p for p in agent.agent_prompts)
    assert not any(HARM in p for p in agent.agent_prompts), "the gridnav observation never retrieves the sudoku skill"
