"""The README is a guide: within its budget, citing nothing outside the repository, and its own-environment
example runs as written (the class plays through `rollout`, the config names it and validates)."""

from __future__ import annotations

import re
from pathlib import Path

from coevo.run.config import load_config
from tasks.agents import env_class, rollout

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_is_a_guide_within_its_budget():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "REFERENCES" not in text, "cite the papers and repositories themselves, not a file outside the repository"
    assert "make demo" in text and "make test" in text


def bisect(prompts: list[str]) -> list[str]:
    """A policy that reads the example's hints and halves the range: it solves every episode."""
    answers = []
    for prompt in prompts:
        low, high = 1, 20
        for guess, hint in re.findall(r"(\d+) \((higher|lower)\)", prompt):
            low, high = (max(low, int(guess) + 1), high) if hint == "higher" else (low, min(high, int(guess) - 1))
        answers.append(str((low + high) // 2))
    return answers


def test_the_own_environment_example_runs_as_written(tmp_path, monkeypatch):
    source = next(block for block in blocks("python") if block.startswith("# guess.py"))
    config = next(block for block in blocks("toml") if "[workload]" in block)
    file_name = re.search(r"^# (\S+\.py)$", source, flags=re.M).group(1)
    (tmp_path / file_name).write_text(source)
    (tmp_path / "run.toml").write_text(config)
    monkeypatch.chdir(ROOT)  # the config's relative path is taken from the config's directory
    spec = load_config(tmp_path / "run.toml").workload.env
    assert spec == f"{tmp_path / file_name}:{spec.rsplit(':', 1)[1]}"
    cls = env_class(spec)
    episodes = rollout(spec, cls.splits["val"][:4], bisect)
    assert all(episode.success for episode in episodes)
    assert not any(episode.success for episode in rollout(spec, cls.splits["val"][:2], lambda ps: ["none"] * len(ps)))
