"""Batched rollouts: one policy call per turn for all live episodes, seeds bound to episodes, adapters."""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import dataclass, replace

import numpy as np
import pytest

from coevo.llm.base import AGENT_SAMPLING
from tasks.agents import Prompt, llm_policy, make_env, rollout
from tasks.agents.gym import GymTextEnv


def oracle(name: str, horizon: int):
    """A policy that knows each instance's solution (through the Prompt's seed): solves in H turns."""
    plans: dict[int, list[str]] = {}

    def policy(prompts: list[str]) -> list[str]:
        actions = []
        for prompt in prompts:
            if prompt.seed not in plans:
                env = make_env(name, horizon)
                env.reset(prompt.seed)
                plans[prompt.seed] = [
                    f"set {r + 1} {c + 1} {env.solution[r, c]}" for r, c in zip(*np.nonzero(~env.givens), strict=True)
                ]
            actions.append(plans[prompt.seed][prompt.turn - 1])
        return actions

    return policy


def test_an_oracle_solves_every_episode_in_h_turns():
    episodes = rollout("sudoku", [1, 2, 3], oracle("sudoku", 10), horizon=10)
    assert [e.seed for e in episodes] == [1, 2, 3]
    assert all(e.success and e.reward == 1.0 and len(e.turns) == 10 and e.horizon == 10 for e in episodes)
    assert episodes[0].turns[-1].reward == 1.0 and episodes[0].turns[0].reward == 0.0
    assert episodes[0].reason == "solved: the board is full and valid"


def test_live_episodes_share_one_policy_call_per_turn():
    calls: list[int] = []
    solve = oracle("sudoku4", 2)

    def policy(prompts: list[str]) -> list[str]:
        calls.append(len(prompts))
        # Episode of seed 0 plays well, the others only write nonsense until their turns run out.
        return [solve([p])[0] if p.seed == 0 else "?" for p in prompts]

    episodes = rollout("sudoku4", [0, 1, 2], policy, horizon=2)
    assert calls == [3, 3, 2, 2, 2, 2]
    assert episodes[0].success and len(episodes[0].turns) == 2
    assert [len(e.turns) for e in episodes[1:]] == [6, 6]
    assert episodes[1].reason == "out of turns (6): every action was invalid"


@dataclass(frozen=True)
class FakeCompletion:
    text: str
    completion_tokens: int


class SeededFakeLLM:
    """Writes a random move from its request's own seed, as HFBackend samples from per-request seeds."""

    def generate_each(self, items):
        moves = ["move up", "move down", "move left", "move right", "I am not sure"]
        return [FakeCompletion(random.Random(sampling.seed).choice(moves), 3) for _, sampling in items]


def test_llm_policy_binds_randomness_to_the_episode_not_the_batch():
    policy = llm_policy(SeededFakeLLM(), AGENT_SAMPLING, seed=5)
    alone = rollout("gridnav", [11], policy, horizon=4)[0]
    batched = rollout("gridnav", [9, 10, 11, 12], policy, horizon=4)
    assert batched[2] == alone
    again = rollout("gridnav", [9, 10, 11, 12], policy, horizon=4)
    assert again == batched
    other_seed = rollout("gridnav", [9, 10, 11, 12], llm_policy(SeededFakeLLM(), AGENT_SAMPLING, seed=6), horizon=4)
    assert [t.action for e in other_seed for t in e.turns] != [t.action for e in batched for t in e.turns]
    assert all(t.tokens == 3 for t in alone.turns)
    assert json.loads(json.dumps(alone.to_json()))["turns"][0]["prompt"].startswith("You are in a 9x9 grid")


class RecordingLLM(SeededFakeLLM):
    """Keeps the sampling settings of every request it is sent."""

    def __init__(self) -> None:
        self.sent = []

    def generate_each(self, items):
        self.sent += [sampling for _, sampling in items]
        return super().generate_each(items)


def test_a_turn_stops_at_the_end_of_a_one_line_action_within_the_environments_cap():
    llm = RecordingLLM()
    rollout("gridnav", [1, 2], llm_policy(llm, replace(AGENT_SAMPLING, stop=("###",)), seed=0), horizon=2)
    cap = make_env("gridnav", 2).max_action_tokens
    assert cap < AGENT_SAMPLING.max_new_tokens
    assert llm.sent and all(s.stop == ("###", "\n") and s.max_new_tokens == cap for s in llm.sent)

    llm = RecordingLLM()
    rollout(Counter, [1], llm_policy(llm, AGENT_SAMPLING), max_turns=3)  # declares neither: sampling's own
    assert all(s.stop == () and s.max_new_tokens == AGENT_SAMPLING.max_new_tokens for s in llm.sent)

    llm = RecordingLLM()
    rollout("gridnav", [1], llm_policy(llm, replace(AGENT_SAMPLING, max_new_tokens=4)), horizon=2)
    assert all(s.max_new_tokens == 4 for s in llm.sent)  # the smaller of the two caps


def test_a_policy_returning_the_wrong_number_of_actions_is_a_bug_not_an_episode():
    with pytest.raises(ValueError, match="returned 1 actions for 2 prompts"):
        rollout("gridnav", [1, 2], lambda prompts: ["move up"])


def test_non_text_actions_and_huge_texts_are_invalid_turns_not_crashes():
    episode = rollout("gridnav", [3], lambda prompts: [None], horizon=2)[0]
    assert episode.reason.endswith("every action was invalid") and len(episode.turns) == 6
    episode = rollout("gridnav", [3], lambda prompts: ["z" * 10**7], horizon=2)[0]
    assert len(episode.turns[0].action) == 2000 and not episode.success


class Counter:
    """A Gymnasium-style env (reset returns (obs, info)): say 'up' `target` times; never truncates itself."""

    def __init__(self, target: int | None = 3) -> None:
        self.target = target

    def reset(self, seed=None, options=None):
        self.count = 0
        return f"count {self.count}", {}

    def step(self, action):
        if action == "boom":
            raise ValueError("unparseable")
        self.count += action == "up"
        done = self.target is not None and self.count >= self.target
        return f"count {self.count}", float(done), done, False, {}


def test_gymnasium_style_objects_run_unchanged():
    episodes = rollout(Counter, [0, 1], lambda prompts: ["up"] * len(prompts), max_turns=10)
    assert all(e.success and e.reward == 1.0 and len(e.turns) == 3 for e in episodes)
    assert episodes[0].env == "Counter" and episodes[0].horizon is None and episodes[0].turns[1].prompt == "count 1"


def test_a_never_ending_environment_is_stopped_and_one_without_a_budget_needs_max_turns():
    episode = rollout(lambda: Counter(target=None), [0], lambda prompts: ["up"], max_turns=4)[0]
    assert (len(episode.turns), episode.success, episode.reason) == (4, False, "stopped after 4 turns")
    with pytest.raises(ValueError, match="pass max_turns"):
        rollout(Counter, [0], lambda prompts: ["up"])


def test_an_adapted_environment_that_raises_ends_the_episode_with_the_error():
    episode = rollout(Counter, [0], lambda prompts: ["boom"], max_turns=5)[0]
    assert len(episode.turns) == 1 and not episode.success and "unparseable" in episode.reason


def test_old_gym_four_tuples_and_non_text_observations_are_translated():
    class OldGym:
        def reset(self, seed=None):
            return 0

        def step(self, action):
            return int(action), 1.0, True, {"success": True}

    env = GymTextEnv(OldGym(), observe=lambda obs: f"state {obs}")
    assert env.reset(0) == "state 0"
    assert env.step("7") == ("state 7", 1.0, True, False, {"success": True})


def test_textarena_single_player_game_runs_offline():
    pytest.importorskip("textarena")
    from tasks.agents.gym import TextArenaEnv

    def count_up(prompts: list[str]) -> list[str]:
        return [f"My guess is [{p.turn}]" for p in prompts]

    episode = rollout(lambda: TextArenaEnv("GuessTheNumber-v0"), [1], count_up, max_turns=12)[0]
    assert episode.env == "GuessTheNumber-v0" and "[GAME] You are Player 0" in episode.turns[0].prompt
    assert episode.success and episode.reward == 1.0 and len(episode.turns) == 5  # seed 1 hides 5
    garbage = rollout(lambda: TextArenaEnv("Sudoku-v0"), [1], lambda prompts: ["no"], max_turns=5)[0]
    assert not garbage.success and "Invalid" in garbage.reason


def test_prompts_are_plain_strings_for_any_policy_and_survive_pickling():
    prompt = Prompt("hello", seed=4, turn=2, stop=("\n",), max_tokens=9)
    assert prompt == "hello" and prompt.upper() == "HELLO" and (prompt.seed, prompt.turn) == (4, 2)
    copy = pickle.loads(pickle.dumps(prompt))
    assert isinstance(copy, Prompt) and (copy, copy.seed, copy.turn, copy.stop, copy.max_tokens) == (
        "hello", 4, 2, ("\n",), 9
    )
    assert copy.with_text("hi").stop == ("\n",) and copy.with_text("hi").max_tokens == 9
