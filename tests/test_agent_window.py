"""The agent workload's generation window and held-out split: what the runner used to pick for it."""

from __future__ import annotations

from coevo.family import EPISODES
from coevo.workloads.agents import AgentWorkload
from tasks.agents.splits import split_seeds


class Moving:
    def generate_each(self, items):
        return [type("C", (), {"text": "move up", "completion_tokens": 1})() for _ in items]


def test_each_generation_plays_the_next_window_of_seeds_and_wraps_around():
    workload = AgentWorkload(Moving(), "gridnav", 2, (1, 2, 3, 4, 5), window=2)
    assert not EPISODES.missing(AgentWorkload)
    assert [workload.at_generation(g).seeds for g in (1, 2, 3)] == [(1, 2), (3, 4), (5, 1)]
    assert workload.at_generation(2).split == "search"
    assert AgentWorkload(Moving(), "gridnav", 2, (1, 2, 3)).at_generation(7).seeds == (1, 2, 3)


def test_heldout_episodes_play_the_first_instances_of_the_heldout_split():
    workload = AgentWorkload(Moving(), "gridnav", 2, (1,), heldout="test", heldout_limit=3)
    played = workload.heldout_episodes()
    assert [e.seed for e in played] == split_seeds("test")[:3]
