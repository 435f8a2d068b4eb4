"""Per-skill credit as an effect against absence: balanced subsets per member, the N-skill credit split."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from coevo.credit_split import additive_residuals, effects_against_absence
from coevo.run.config import RunConfig, load_config
from coevo.run.session import start_run
from coevo.skills.skill_credit import shown_to
from test_skills_methods import CONFIG, MARKER, FakeAgentLLM

HARM = "FREEZE"
"""A lesson text that makes the fake agent answer nonsense (it never reaches a goal)."""


class HarmedAgentLLM(FakeAgentLLM):
    def _move(self, prompt: str) -> str:
        return "hmm" if HARM in prompt else super()._move(prompt)


def test_each_skill_is_shown_to_a_balanced_half_bound_to_the_member_index():
    names = ["a", "b", "c"]
    subsets = shown_to(names, 6, seed=1, generation=2, share=0.5)
    assert all(sum(n in s for s in subsets) == 3 for n in names)
    assert shown_to(names, 6, 1, 2, 0.5) == subsets, "seeded: a resume draws the same subsets"
    assert shown_to(list(reversed(names)), 6, 1, 2, 0.5) == subsets, "a skill's draw does not depend on the others"
    assert shown_to(names, 6, 1, 3, 0.5) != subsets, "each generation draws anew"
    assert sorted(len(s) for s in shown_to(["a"], 2, 1, 1, 0.9)) == [0, 1], "one fewer than all keeps a contrast"
    assert shown_to(names, 4, 1, 1, 1.0) == [frozenset(names)] * 4


def test_one_skill_is_the_two_variant_split_and_additive_effects_are_removed():
    shown = [{"a"}, set(), {"a"}, set()]
    rewards = [3.0, 1.0, 5.0, 0.0]
    assert effects_against_absence(shown, rewards) == {"a": 4.0 - 0.5}
    residuals = additive_residuals(shown, rewards, effects_against_absence(shown, rewards))
    assert residuals == pytest.approx([3.0 - 4.0, 1.0 - 0.5, 5.0 - 4.0, 0.0 - 0.5]), "reward less its variant's mean"
    # two skills whose effects add exactly (+2 and -1): nothing is left for the weights
    shown = [{"a", "b"}, {"a"}, {"b"}, set()]
    rewards = [1.0 + 2 - 1, 1.0 + 2, 1.0 - 1, 1.0]
    effects = effects_against_absence(shown, rewards)
    assert effects == pytest.approx({"a": 2.0, "b": -1.0})
    assert additive_residuals(shown, rewards, effects) == pytest.approx([0.0] * 4)
    assert effects_against_absence([{"a"}, {"a"}], [1.0, 0.0]) == {}, "shown to all: no contrast, no estimate"


def config_with_library(tmp_path: Path, lessons: Iterable[tuple[str, str, str]], *overrides: str) -> RunConfig:
    """The skills test config (`CONFIG`) starting from a library of (name, description, body) text skills."""
    library = tmp_path / "lib"
    for name, description, body in lessons:
        (library / name).mkdir(parents=True)
        (library / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    (tmp_path / "c.toml").write_text(CONFIG)
    return load_config(tmp_path / "c.toml", [f"settings.library={json.dumps(str(library))}", *overrides])


def test_a_helpful_skill_earns_positive_credit_and_a_harmful_one_negative(tmp_path: Path):
    lessons = [
        ("step-to-goal", "a lesson", f"{MARKER}: step toward the goal."),
        ("stand-still", "a lesson", f"{HARM}."),
    ]
    config = config_with_library(tmp_path, lessons, "population_size=6", "budget=12", "settings.max_edits=1")
    with start_run(config, tmp_path / "run", HarmedAgentLLM()) as runner:
        runner.run()
        skills = runner.method.skills.library
    assert skills["step-to-goal"].meta.credit > 0
    assert skills["stand-still"].meta.credit < 0
    assert skills["step-to-goal"].meta.estimates == skills["stand-still"].meta.estimates == 2
