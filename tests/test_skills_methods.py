"""The skill methods of the agent workload: the real loop with a scripted proposer, the pinned library."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coevo.cli import main
from coevo.family import EPISODES
from coevo.llm.base import Completion
from coevo.run.config import ConfigError, load_config
from coevo.run.session import resume_run, start_run
from coevo.skills import load_library
from coevo.skills.pinning import RUN_LIBRARY_DIR

MARKER = "GREEDY"
"""The lesson text that makes the fake agent walk to the goal instead of always up."""

CONFIG = """
method = "skills"
model = "unused"
budget = 4
seed = 3
population_size = 2
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = 4
[settings]
analyses = 5
max_edits = 3
heldout_episodes = 6
"""

ANSWERS = [
    f"name: walk-to-goal\ndescription: when the goal is elsewhere\nlesson: {MARKER}: step toward the goal.",
    f"name: walk-to-goal\ndescription: when the goal is elsewhere\nlesson: {MARKER}: step toward the goal.",
    "name: lone-lesson\ndescription: seen once\nlesson: try something.",
    "name: useless-tip\ndescription: always\nlesson: breathe before moving.",
    "name: useless-tip\ndescription: always\nlesson: breathe before moving.",
]


def _completion(text: str) -> Completion:
    return Completion(text, 8, 2, 0.0, "stop", "fake-agent")


class FakeAgentLLM:
    """Moves up unless the prompt teaches the marker lesson (then walks to most goals); answers trajectory
    analyses from a script, recording every analysis prompt."""

    name = "fake-agent"
    supports_weights = False

    def __init__(self) -> None:
        self.analysis_prompts: list[str] = []

    def generate_each(self, items):
        return [_completion(self._move(messages[0]["content"])) for messages, _ in items]

    def generate(self, requests, sampling):
        self.analysis_prompts += [messages[0]["content"] for messages in requests]
        return [_completion(ANSWERS[i % len(ANSWERS)]) for i in range(len(requests))]

    @staticmethod
    def _move(prompt: str) -> str:
        if MARKER not in prompt:
            return "move up"
        (row, col), (goal_row, goal_col) = [
            tuple(map(int, m)) for m in re.findall(r"row (\d+), column (\d+)", prompt.rsplit("You are at", 1)[-1])
        ][:2]
        if row != goal_row:
            return "move down" if goal_row > row else "move up"
        return "move right" if goal_col > col else "move up"  # never left: the lesson helps, not always


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "skills.toml"
    path.write_text(CONFIG)
    return path


def test_each_gate_refuses_inside_the_loop_and_the_refusals_reach_the_proposer(config: Path, tmp_path: Path):
    llm = FakeAgentLLM()
    with start_run(load_config(config), tmp_path / "run", llm) as runner:
        runner.run()
        library = runner.method.skills.library
        refusals = {(r.edit.split(":")[0], r.gate) for r in runner.method.skills.refused.refusals}
        recorded = [call for call in runner.store.llm_calls() if call["operator"] == "skill-analysis"]
    assert list(library) == ["walk-to-goal"], "only the recurring lesson that beats the held-out batch is kept"
    assert set(library["walk-to-goal"].meta.sources) and len(library["walk-to-goal"].meta.sources) == 2
    assert ("add text skill 'lone-lesson'", "recurrence") in refusals
    assert ("add text skill 'useless-tip'", "held-out") in refusals
    first_generation = llm.analysis_prompts[: len(ANSWERS)]
    assert not any("refused" in prompt for prompt in first_generation)
    assert any("lone-lesson" in p and "refused by recurrence" in p for p in llm.analysis_prompts[len(ANSWERS) :])
    assert any(MARKER in p for p in llm.analysis_prompts[len(ANSWERS) :]), "generation 2 plays with the skill"
    assert len(recorded) == len(llm.analysis_prompts), "every analysis call is in the run's record"
    exported = load_library(tmp_path / "run" / RUN_LIBRARY_DIR)
    assert exported.hash == library.hash
    assert library["walk-to-goal"].meta.uses == 1 and library["walk-to-goal"].meta.credit is not None


def test_a_run_pins_its_starting_library_and_refuses_a_changed_one_on_resume(config: Path, tmp_path: Path, capsys):
    start = tmp_path / "lib"
    (start / "read-goal").mkdir(parents=True)
    skill_md = start / "read-goal" / "SKILL.md"
    skill_md.write_text("---\nname: read-goal\ndescription: read the goal first\n---\n# Procedure\nRead it.\n")
    loaded = load_config(config, [f"settings.library={json.dumps(str(start))}", "budget=2", "model=skills_agent_lm:build"])
    with start_run(loaded, tmp_path / "run", FakeAgentLLM()) as runner:
        runner.run_step()  # generation 0 only: the pin is committed
        pinned = runner.method.skills.pinned
    assert pinned == {"read-goal": load_library(start)["read-goal"].id}
    resume_run(tmp_path / "run", FakeAgentLLM()).close()  # unchanged: resumes
    skill_md.write_text(skill_md.read_text() + "Then move.\n")
    with pytest.raises(ConfigError, match="skills library .* changed since the run started \\(skill 'read-goal'\\)"):
        resume_run(tmp_path / "run", FakeAgentLLM())
    capsys.readouterr()
    assert main(["resume", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("coevo: error: skills library ") and "\n" not in err

    assert main(["skills", "list", str(tmp_path / "run"), "--json"]) == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["read-goal"]
    assert main(["skills", "export", str(tmp_path / "run"), str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "read-goal" / "SKILL.md").exists()


def test_a_starting_library_that_does_not_load_is_a_config_error(config: Path, tmp_path: Path):
    with pytest.raises(ConfigError, match="config key 'settings.library': .*not a directory"):
        load_config(config, [f"settings.library={json.dumps(str(tmp_path / 'missing'))}"])


JOINT = """
method = "{method}"
model = "skills_agent_lm:build"
budget = 4
seed = 2
population_size = 2
[es]
sigma = 0.5
alpha = 0.1
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = 3
heldout_episodes = 4
[settings]
analyses = 3
heldout_episodes = 4
"""


@pytest.mark.parametrize("method", ["coevo", "es-then-skills"])
def test_the_joint_methods_update_weights_and_learn_from_the_same_episodes(tmp_path: Path, method, one_torch_thread):
    from skills_agent_lm import build

    path = tmp_path / "joint.toml"
    path.write_text(JOINT.format(method=method))
    config = load_config(path)
    with start_run(config, tmp_path / "run", build()) as runner:
        assert runner.method.name == method and runner.family is EPISODES
        runner.run()
        records = runner.store.es_records(0)
        skills = runner.method.skills
        refused_generations = {r.generation for r in skills.refused.refusals}
    assert len(records) == 2, "budget 4 / population 2: an ES update each generation"
    assert "one-off" not in skills.library, "seen in one trajectory per generation: the recurrence gate refuses it"
    if method == "coevo":
        assert refused_generations == {1, 2}, "every generation proposes edits"
    else:
        assert refused_generations == {2}, "one distillation, after the last ES generation"


@pytest.mark.slow
def test_sigkill_then_resume_gives_the_same_library_and_weights(tmp_path: Path, monkeypatch):
    from test_resume import coevo, kill_after

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # tiny matrices: more threads only spin on a shared CPU
    config = tmp_path / "joint.toml"
    config.write_text(JOINT.format(method="coevo").replace("budget = 4", "budget = 6"))
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    assert coevo("run", str(config), "--run-dir", str(straight)).returncode == 0
    process = coevo("run", str(config), "--run-dir", str(interrupted), wait=False)
    kills = int(kill_after(process, interrupted, steps=2, extra_seconds=0.2))
    process = coevo("resume", str(interrupted), wait=False)
    kills += kill_after(process, interrupted, steps=4, extra_seconds=0.05)
    assert kills >= 1, "the run finished before it could be killed; make it longer"
    resumed = coevo("resume", str(interrupted))
    assert resumed.returncode == 0, resumed.stderr
    libraries = [load_library(run / RUN_LIBRARY_DIR) for run in (straight, interrupted)]
    assert libraries[0].hash == libraries[1].hash
    assert [s.meta for s in libraries[0].values()] == [s.meta for s in libraries[1].values()]
    shows = [json.loads(coevo("runs", "show", str(run), "--json").stdout) for run in (straight, interrupted)]
    assert shows[0]["weights_sha256"] == shows[1]["weights_sha256"] is not None
