"""A user's episode workload, written from the `EPISODES` family's protocol alone (not on coevo's agent
workload): one file, named by the config, checked when it loads, and run by `es` end to end."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from coevo.run.config import ConfigError, validate
from coevo.run.session import start_run

COINS = '''
from dataclasses import dataclass, replace

from pydantic import Field

from coevo.family import EPISODES
from coevo.workload import Evaluation, WorkloadSettings
from tasks.agents.rollout import Episode


class CoinSettings(WorkloadSettings):
    episodes: int = Field(2, ge=1, description="episodes per member and generation")


@dataclass(frozen=True)
class Coins:
    """An episode is won when the member's ES sign is +1: rewards differ between mirrored members."""

    seeds: tuple[int, ...]
    window: int
    split: str = "search"
    env: str = "coins"
    horizon: int = 1
    heldout: str = "val"
    heldout_every: int | None = None
    name = "coins"
    sense = "max"
    family = EPISODES
    settings_model = CoinSettings

    @classmethod
    def build(cls, settings, facts, llm, host=None, sandbox=None):
        return cls(tuple(range(100)), settings.episodes)

    def at_generation(self, generation):
        start = (generation - 1) * self.window
        return replace(self, seeds=self.seeds[start : start + self.window])

    def on_split(self, split, limit=None):
        return replace(self, seeds=tuple(range(1000, 1000 + (limit or 3))), split=split)

    def evaluate(self, members, *, traces=False):
        return [self.evaluate_at(i, m, traces=traces) for i, m in enumerate(members)]

    def evaluate_at(self, index, member, *, traces=False):
        won = member.weights is not None and member.weights.sign == 1
        rewards = tuple(float(won) for _ in self.seeds)
        return Evaluation("max", self.split, rewards, sum(rewards) / len(rewards))

    def heldout_episodes(self, member):
        split = self.on_split(self.heldout)
        return [Episode(self.env, self.horizon, seed, (), 0.0, False, "no coin") for seed in split.seeds]

    def remember(self, texts):
        pass

    def close(self):
        pass


class NoHeldOut:
    """Declares the family and a builder, and nothing of the family's protocol."""

    family = EPISODES
    settings_model = None

    @classmethod
    def build(cls, settings, facts, llm, host=None, sandbox=None):
        return cls()
'''


@pytest.fixture
def coins(tmp_path: Path) -> str:
    path = tmp_path / "coins.py"
    path.write_text(textwrap.dedent(COINS))
    return str(path)


def config_with(kind: str, **workload) -> dict:
    return {
        "method": "es",
        "model": "tiny_lm:build_tiny_agent",
        "budget": 8,
        "population_size": 4,
        "es": {"sigma": 0.5, "alpha": 0.1},
        "workload": {"kind": kind, **workload},
    }


def test_es_runs_on_a_users_episode_workload_through_its_family_protocol(coins: str, tmp_path: Path, one_torch_thread):
    config = validate(config_with(f"{coins}:Coins", episodes=3))
    with start_run(config, tmp_path / "run") as runner:
        assert runner.family.name == "episodes"
        runner.run()
        records = runner.store.es_records(0)
        heldout = dict(runner.heldout)
    assert len(records) == 2, "budget 8 / population 4: two ES updates"
    assert all(sorted(set(r.raw_rewards)) == [0.0, 1.0] for r in records), "the + members won, the - members lost"
    assert heldout["before"]["episodes"] == 3 and heldout["before"]["seeds"] == (1000, 1001, 1002)


def test_an_episode_workload_lacking_a_member_of_its_protocol_is_refused_when_it_loads(coins: str) -> None:
    with pytest.raises(ConfigError) as error:
        validate(config_with(f"{coins}:NoHeldOut"))
    message = str(error.value)
    assert "\n" not in message and message.endswith(
        "is not a workload (a workload of the episodes family also needs at_generation, close, env, evaluate, "
        "evaluate_at, heldout, heldout_episodes, heldout_every, horizon, name, on_split, remember, seeds, sense)"
    )
