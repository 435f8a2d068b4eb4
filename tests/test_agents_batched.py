"""Low-rank agent members play together, a batch row per member, and play what they play one by one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tiny_lm import build_tiny_agent

from coevo.candidate import WeightsRef
from coevo.llm.base import AGENT_SAMPLING
from coevo.workload import Member
from coevo.workloads.agents import AgentWorkload
from tasks.agents.splits import split_seeds


def _members(sigma: float) -> list[Member]:
    texts = ["", "Read the goal first.", ""]
    return [
        Member(text, WeightsRef("m", 0, seed=11 + i, sigma=sigma, sign=1 - 2 * (i % 2))) for i, text in enumerate(texts)
    ]


def _moves(played) -> list[list[tuple[str, float]]]:
    return [[(t.action, t.reward) for e in episodes for t in e.turns] for episodes in played]


def test_low_rank_members_decode_each_turn_in_one_batch_and_equal_playing_them_in_turn(one_torch_thread):
    llm = build_tiny_agent()
    llm.max_batch_size = 64
    batches: list[int] = []
    generate_each = llm.generate_each
    llm.generate_each = lambda items: batches.append(len(items)) or generate_each(items)
    seeds = tuple(split_seeds("search")[:4])
    workload = AgentWorkload(llm, "gridnav", 2, seeds, host=llm.weights_host("all_linear", rank=2))
    members = _members(sigma=0.5)

    together = workload.episodes(members)
    first_turn = batches[0]
    batches.clear()
    in_turn = replace(workload, batched=False).episodes(members)

    assert first_turn == len(members) * len(seeds), "every member's first turn in one batch"
    assert batches[0] == len(seeds), "one by one: a member's episodes only"
    assert _moves(together) == _moves(in_turn)
    assert [[e.reward for e in m] for m in together] == [[e.reward for e in m] for m in in_turn]
    assert _moves(together)[0] != _moves(together)[2], "each member plays its own episodes"


def test_members_beyond_max_batch_size_decode_in_chunks_with_the_same_episodes(one_torch_thread):
    llm = build_tiny_agent()
    seeds = tuple(split_seeds("search")[:3])
    workload = AgentWorkload(llm, "gridnav", 2, seeds, host=llm.weights_host("all_linear", rank=1))
    members = _members(sigma=0.5)
    llm.max_batch_size = 4  # 9 rows: chunks of 4, 4, 1 with member boundaries inside chunks
    chunked = workload.episodes(members)
    llm.max_batch_size = 64
    assert _moves(chunked) == _moves(workload.episodes(members))


@pytest.mark.slow
def test_smollm2_low_rank_members_play_the_same_gridnav_episodes_batched_and_in_turn(one_torch_thread):
    from coevo.llm.hf import HFBackend

    llm = HFBackend.load("smollm2-135m", max_batch_size=64, dtype="float32")  # low rank moves fp32 weights
    seeds = tuple(split_seeds("search")[:2])
    sampling = replace(AGENT_SAMPLING, max_new_tokens=24)
    workload = AgentWorkload(llm, "gridnav", 2, seeds, host=llm.weights_host("all_linear", rank=1), sampling=sampling)
    members = _members(sigma=1e-3)
    together = workload.episodes(members)
    in_turn = replace(workload, batched=False).episodes(members)
    assert _moves(together) == _moves(in_turn)
    assert [[e.reward for e in m] for m in together] == [[e.reward for e in m] for m in in_turn]


def test_shared_sampling_gives_members_the_same_streams_so_only_their_weights_tell_them_apart(one_torch_thread):
    llm = build_tiny_agent()
    seeds = tuple(split_seeds("search")[:4])
    workload = AgentWorkload(llm, "gridnav", 2, seeds, host=llm.weights_host("all_linear", rank=2))
    alike = [Member("", WeightsRef("m", 0, seed=11 + i, sigma=0.0, sign=1)) for i in range(3)]
    own_streams = _moves(workload.episodes(alike))
    assert own_streams[0] != own_streams[1], "equal weights, own streams: the sampler tells members apart"
    shared = replace(workload, shared_sampling=True)
    together = _moves(shared.episodes(alike))
    assert together[0] == together[1] == together[2], "equal weights, shared streams: equal episodes"
    assert together == _moves(replace(shared, batched=False).episodes(alike))
    assert together[0] == _moves(shared.episodes(alike[:1]))[0] == own_streams[0], "member 0's streams for all"
    perturbed = _moves(shared.episodes(_members(sigma=0.5)))
    assert perturbed[0] != perturbed[2], "different weights still play differently"
