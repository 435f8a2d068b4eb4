"""Workloads, LLM backends and executors are plugins, as methods, tasks and environments are: a class a
user names by file (`path.py:Class`) is found, checked and built through the same call as coevo's own
(`build_workload`, `load_llm`, `open_executor`), and its own keys are checked by the model it declares."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_runner import BASE, config

from coevo.family import HEURISTICS
from coevo.run.build import build_workload, load_llm
from coevo.run.config import ConfigError, from_stored, load_config, validate
from coevo.run.executor import LocalExecutor, open_executor
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore

LENGTHS = """
from pydantic import Field

from coevo.family import HEURISTICS
from coevo.workload import Evaluation, WorkloadSettings


class LengthSettings(WorkloadSettings):
    target: int = Field(3, ge=1, description="the length that scores best")


class Lengths:
    '''Scores a member by how close its text's length is to `target`.'''

    family = HEURISTICS
    settings_model = LengthSettings
    name, sense = "lengths", "min"

    def __init__(self, target):
        self.target = target

    @classmethod
    def build(cls, settings, facts, llm, host=None, sandbox=None):
        return cls(settings.target)

    evaluator = None  # no sandbox: a text's length needs none

    def evaluate(self, members, *, traces=False):
        return self.verdicts(self.codes(members))

    def codes(self, members):
        return [m.text for m in members]

    def verdicts(self, codes):
        return [Evaluation("min", "search", (abs(len(c) - self.target),), abs(len(c) - self.target)) for c in codes]

    def remember(self, texts):
        pass

    def close(self):
        pass


class NoBuilder:
    family = HEURISTICS
    settings_model = None


class NoVerdicts:
    '''Scores text, but offers no sandbox, and no way to ship code to a worker and get verdicts back.'''

    family = HEURISTICS
    settings_model = None
    name, sense = "no-verdicts", "min"

    @classmethod
    def build(cls, settings, facts, llm, host=None, sandbox=None):
        return cls()

    def evaluate(self, members, *, traces=False):
        return [Evaluation("min", "search", (0.0,), 0.0) for _ in members]

    def remember(self, texts):
        pass

    def close(self):
        pass
"""

ECHO = """
from pydantic import BaseModel, ConfigDict, Field


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repeat: int = Field(1, ge=1)


class Echo:
    '''A backend that answers every prompt with the model's name; refuses a temperature above 1.'''

    options_model = EchoOptions

    @staticmethod
    def check(config):
        if config.llm.temperature > 1:
            raise ValueError("the echo backend takes llm.temperature <= 1")

    @staticmethod
    def load(config, dtype=None):
        return ("echo", config.model, dtype, config.llm.engine_options.get("repeat", 1))
"""

INLINE = """
from coevo.run.executor import LocalExecutor


class Inline(LocalExecutor):
    extra = None

    @classmethod
    def from_config(cls, config, address=None):
        executor = cls()
        executor.address = address
        return executor


class Uninstalled(Inline):
    extra = ("coevo_no_such_module", "nowhere")
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def one_line_error(data: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        validate(data)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_a_users_workload_is_validated_by_its_own_model_and_built_by_build_workload(tmp_path: Path) -> None:
    spec = f"{write(tmp_path, 'lengths.py', LENGTHS)}:Lengths"
    settings = {"batch": 2}
    current = validate({**BASE, "method": "sample", "settings": settings, "workload": {"kind": spec, "target": 5}})
    workload = build_workload(current, None)
    assert type(workload).__name__ == "Lengths" and workload.target == 5
    assert type(current.workload).__name__ == "LengthSettings" and current.family is HEURISTICS
    assert validate(current.model_dump(mode="json")).workload == current.workload, "a stored run reads it back"

    data = {**BASE, "method": "sample", "settings": settings}
    assert one_line_error({**data, "workload": {"kind": spec, "targte": 5}}) == (
        f"unknown config key 'workload.targte' for workload {spec} (did you mean 'workload.target'?)"
    )
    assert one_line_error({**data, "workload": {"kind": spec, "target": 0}}).startswith(
        "config key 'workload.target': Input should be greater than or equal to 1"
    )
    assert "is not a workload (it needs build" in one_line_error({**data, "workload": {"kind": f"{spec[:-7]}NoBuilder"}})
    assert one_line_error({**data, "workload": {"kind": f"{spec[:-7]}NoVerdicts"}}).endswith(
        "is not a workload (a workload of the heuristics family also needs codes, evaluator, verdicts)"
    )
    assert one_line_error({**data, "workload": {"kind": "lenghts"}}).startswith(
        "unknown workload 'lenghts'; known workloads: "
    )


def test_a_workload_file_in_a_config_is_found_from_the_configs_directory(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path / "plugins", "lengths.py", LENGTHS)
    run = write(
        tmp_path / "plugins",
        "run.toml",
        'method = "sample"\ntask = "tsp_construct"\nbudget = 4\n'
        '[workload]\nkind = "lengths.py:Lengths"\ntarget = 4\n[settings]\nbatch = 2\n',
    )
    monkeypatch.chdir(tmp_path)
    assert load_config(run).workload.kind == f"{tmp_path / 'plugins' / 'lengths.py'}:Lengths"


def test_a_users_backend_checks_the_config_and_is_loaded_by_load_llm(tmp_path: Path) -> None:
    spec = f"{write(tmp_path, 'echo.py', ECHO)}:Echo"
    current = config("sample", llm={"backend": spec})
    assert load_llm(current, "float32") == ("echo", current.model, "float32", 1)
    repeated = config("sample", llm={"backend": spec, "engine_options": {"repeat": 3}})
    assert load_llm(repeated)[3] == 3, "its own keys go in engine_options, checked by its options model"
    assert one_line_error({**BASE, "method": "sample", "llm": {"backend": spec, "engine_options": {"loud": 1}}}) == (
        "llm.engine_options.loud: Extra inputs are not permitted"
    )
    assert one_line_error({**BASE, "method": "sample", "llm": {"backend": spec, "temperature": 1.5}}) == (
        "the echo backend takes llm.temperature <= 1"
    )
    assert one_line_error({**BASE, "method": "sample", "llm": {"backend": "ecco"}}).startswith(
        "config key 'llm.backend': unknown backend 'ecco'; known backends: "
    )


def test_api_base_alone_or_on_the_default_backend_names_the_openai_server_as_before() -> None:
    server = "http://127.0.0.1:9/v1"
    for llm in ({"api_base": server}, {"api_base": server, "backend": "transformers"}):
        assert config("sample", llm=llm).llm.backend == "openai"
    assert "needs llm.api_base" in one_line_error({**BASE, "method": "sample", "llm": {"backend": "openai"}})


def test_a_users_executor_is_opened_by_open_executor_and_its_extra_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "inline.py", INLINE)
    current = config("sample")
    executor = open_executor(f"{path}:Inline", current, "cluster:1")
    assert type(executor).__name__ == "Inline" and isinstance(executor, LocalExecutor)
    assert executor.address == "cluster:1"
    assert isinstance(open_executor("local", current), LocalExecutor)
    with pytest.raises(ConfigError, match=r"^--executor \S+:Uninstalled needs the nowhere extra"):
        open_executor(f"{path}:Uninstalled", current)


def test_a_run_stored_with_every_workload_key_resumes_as_it_would_have(tmp_path: Path) -> None:
    """Before each kind owned its keys, every stored `[workload]` held the agent's keys at their
    defaults; an AHD run stored so resumes, and ends where the straight run ends."""
    current = config("sample", budget=7, settings={"batch": 3})
    with start_run(current, tmp_path / "straight") as runner:
        runner.run()
        expected = [c for _, c in runner.store.candidates()]
    former = current.model_dump(mode="json")
    former["workload"] = {
        "kind": "ahd",
        "env": None,
        "horizon": None,
        "episodes": 32,
        "heldout": "val",
        "heldout_episodes": None,
        "heldout_every": None,
    }
    assert from_stored(former)["workload"] == {"kind": "ahd"}
    RunStore.create(tmp_path / "former", former).close()
    with resume_run(tmp_path / "former") as runner:
        runner.run()
        assert [c for _, c in runner.store.candidates()] == expected
    agent = {"kind": "agent", "env": "gridnav", "horizon": 2, "episodes": 2, "heldout": "val"}
    assert from_stored({**former, "method": "es", "workload": agent})["workload"] == agent
