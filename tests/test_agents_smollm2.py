"""Agent episodes on the real embedded SmolLM2-135M (slow: real multi-turn generation on CPU)."""

from __future__ import annotations

import pytest

from coevo.llm.base import AGENT_SAMPLING
from tasks.agents import llm_policy, rollout

pytestmark = pytest.mark.slow


def test_smollm2_plays_gridnav_episodes_to_the_end_and_replays_them(one_torch_thread):
    from coevo.llm.hf import HFBackend

    llm = HFBackend.load("smollm2-135m", dtype="float32")  # bf16 texts can depend on the batch (docs/llm.md)
    policy = llm_policy(llm, AGENT_SAMPLING, seed=0)
    episodes = rollout("gridnav", [20280701, 20280702], policy, horizon=2)
    for episode in episodes:
        assert 1 <= len(episode.turns) <= 6 and episode.reason
        assert episode.success == episode.reason.startswith("reached the goal")
        assert all(1 <= turn.tokens <= AGENT_SAMPLING.max_new_tokens for turn in episode.turns)
    replay = rollout("gridnav", [20280702], policy, horizon=2)[0]
    assert [t.action for t in replay.turns] == [t.action for t in episodes[1].turns]
