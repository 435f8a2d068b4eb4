"""Agent environments: instances, the Sudoku reward rules, refused actions, bad output, horizons, manifests."""

from __future__ import annotations

import numpy as np
import pytest

import tasks.agents.splits as splits_module
import tasks.agents.sudoku as sudoku_module
from tasks.agents import ENV_NAMES, HorizonError, env_class, UnknownEnvError, make_env
from tasks.agents.base import MAX_ACTION_CHARS
from tasks.agents.splits import SPLIT_SIZES, ManifestMismatch, split_seeds, verify_split
from tasks.agents.sudoku import board_conflicts, pattern_solution
from tasks.base import SPLITS


def blanks(env) -> list[tuple[int, int, int]]:
    """(row, col, solution digit), 1-based, of every blank cell."""
    return [(r + 1, c + 1, int(env.solution[r, c])) for r, c in zip(*np.nonzero(~env.givens), strict=True)]


@pytest.mark.parametrize("box", [2, 3])
def test_pattern_solutions_are_valid_and_vary_with_the_seed(box):
    grids = [pattern_solution(box, np.random.default_rng(seed)) for seed in range(20)]
    assert all(board_conflicts(grid, box) == [] for grid in grids)
    assert len({grid.tobytes() for grid in grids}) > 10


@pytest.mark.parametrize("name", ["sudoku", "sudoku4"])
def test_sudoku_instances_have_h_blanks_and_replay_under_their_seed(name):
    for horizon in env_class(name).horizons:
        env = make_env(name, horizon)
        first = env.reset(7)
        assert int((env.board == 0).sum()) == horizon
        assert first == make_env(name, horizon).reset(7)
    assert make_env(name).reset(1) != make_env(name).reset(2)


def test_horizon_and_name_are_validated():
    assert make_env("sudoku").horizon == 5
    with pytest.raises(HorizonError, match="choose one of: 5, 10, 15, 20"):
        make_env("sudoku", 7)
    with pytest.raises(UnknownEnvError, match="known environments: gridnav, gridnav-dense, sudoku"):
        make_env("chess")


def test_solving_every_blank_gives_reward_one_on_the_last_move():
    env = make_env("sudoku", 5)
    env.reset(3)
    cells = blanks(env)
    for i, (r, c, v) in enumerate(cells):
        _, reward, terminated, truncated, info = env.step(f"set {r} {c} {v}")
        assert info["valid"]
        assert (reward, terminated) == ((1.0, True) if i == len(cells) - 1 else (0.0, False))
    assert info["success"] and info["reason"].startswith("solved") and not truncated
    with pytest.raises(RuntimeError):
        env.step("set 1 1 1")


@pytest.mark.parametrize(("name", "expected"), [("sudoku", 0.0), ("sudoku-dense", 0.8)])
def test_a_wrong_digit_stays_and_the_full_invalid_board_scores_by_the_reward_rule(name, expected):
    env = make_env(name, 5)
    env.reset(3)
    (r, c, v), *rest = blanks(env)
    wrong = v % 9 + 1
    _, _, _, _, info = env.step(f"set {r} {c} {wrong}")
    assert info["valid"] and env.board[r - 1, c - 1] == wrong
    _, _, _, _, info = env.step(f"set {r} {c} {v}")  # a filled cell cannot be corrected
    assert not info["valid"] and "already filled" in info["feedback"]
    for rr, cc, vv in rest:
        _, reward, terminated, _, info = env.step(f"set {rr} {cc} {vv}")
    assert terminated and not info["success"]
    assert reward == pytest.approx(expected)
    assert info["reason"].startswith("board full but invalid")


def test_invalid_actions_cost_a_turn_leave_the_board_alone_and_say_why():
    env = make_env("sudoku", 5)
    prompt = env.reset(3)
    before = env.board.copy()
    given = tuple(int(x) + 1 for x in np.argwhere(env.givens)[0])
    cases = {
        f"set {given[0]} {given[1]} 1": "is a given",
        "set 10 1 1": "off the board",
        "set 1 1 0": "not a digit",
        "place a 5 somewhere": "could not read it",
        "": "could not read it",
    }
    for turn, (action, why) in enumerate(cases.items(), start=1):
        prompt, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated, info["valid"], info["turn"]) == (0.0, False, False, False, turn)
        assert why in info["feedback"] and info["feedback"] in prompt
        assert np.array_equal(env.board, before)


def test_actions_are_read_leniently():
    for text in ["Set(1, 9, 4)", "```\nset 1 9 4\n```", "I think: SET 1,9 = 4.", "set 1 9 4\nset 2 8 6"]:
        env = make_env("sudoku", 5)
        env.reset(1)  # (1, 9) is blank with solution 4 in this instance
        assert env.solution[0, 8] == 4 and not env.givens[0, 8]
        _, _, _, _, info = env.step(text)
        assert info["valid"] and env.board[0, 8] == 4, text


@pytest.mark.parametrize("name", list(ENV_NAMES))
def test_bad_output_every_turn_ends_the_episode_with_a_reason(name):
    env = make_env(name)
    env.reset(0)
    garbage = ["", "\x00\xff\ufffd", "lorem ipsum " * 100_000, None, "{}[]()" * 50]
    for turn in range(1, env.max_turns + 1):
        _, reward, terminated, truncated, info = env.step(garbage[turn % len(garbage)])
    assert turn == 3 * env.horizon and truncated and not terminated
    assert reward == 0.0 and not info["success"]
    assert info["reason"] == f"out of turns ({env.max_turns}): every action was invalid"


def test_endless_text_is_cut_before_parsing():
    env = make_env("sudoku4", 2)
    env.reset(0)
    r, c, v = blanks(env)[0]
    _, _, _, _, info = env.step("x" * MAX_ACTION_CHARS + f" set {r} {c} {v}")
    assert not info["valid"]
    _, _, _, _, info = env.step(f"set {r} {c} {v} " + "x" * 10_000_000)
    assert info["valid"]


def test_the_prompt_is_rebuilt_with_rules_feedback_boards_and_empty_cells_but_no_history():
    env = make_env("sudoku4", 2)
    env.reset(0)
    (r, c, v), _ = blanks(env)
    env.step("nonsense")
    prompt, *_ = env.step(f"set {r} {c} {v}")
    assert "each digit 1-4 exactly once" in prompt
    assert f"Last feedback: placed {v} at ({r}, {c})" in prompt and "could not read" not in prompt
    assert "Original board:" in prompt and "Current board:" in prompt and "    1 2 3 4" in prompt
    assert f"({r}, {c})" not in prompt.split("Empty cells")[1]
    assert "Turn 3 of 6." in prompt


def test_gridnav_goal_is_h_moves_away_and_the_shortest_path_wins_in_h_turns():
    for horizon in env_class("gridnav").horizons:
        for seed in range(10):
            env = make_env("gridnav", horizon)
            env.reset(seed)
            (sr, sc), (gr, gc) = env.start, env.goal
            assert abs(sr - gr) + abs(sc - gc) == horizon
            moves = ["down" if gr > sr else "up"] * abs(gr - sr) + ["right" if gc > sc else "left"] * abs(gc - sc)
            for move in moves:
                _, reward, terminated, _, info = env.step(f"move {move}")
            assert terminated and reward == 1.0 and info["success"] and info["turn"] == horizon


def test_gridnav_refuses_walking_into_the_wall():
    env = make_env("gridnav", 2)
    env.reset(0)
    env.position = (0, 0)
    prompt, _, _, _, info = env.step("Move UP please")
    assert not info["valid"] and "wall" in info["feedback"] and env.position == (0, 0)
    assert "You are at row 1, column 1." in prompt


def test_gridnav_dense_pays_the_share_of_closing_moves_and_plays_gridnav_instances():
    def play(env_name: str, moves: list[str]) -> tuple[float, bool]:
        env = make_env(env_name, 2)
        env.reset(7)
        env.position, env.goal = (4, 2), (4, 4)  # a known layout: the goal two moves to the right
        for move in moves:
            _, reward, terminated, truncated, info = env.step(f"move {move}")
            if terminated or truncated:
                return reward, info["success"]
        raise AssertionError("the episode did not end")

    assert make_env("gridnav-dense", 2).reset(3) == make_env("gridnav", 2).reset(3)
    assert play("gridnav-dense", ["up", "right", "right", "down"]) == (1.0, True)
    wandering = ["right", "up", "down", "up", "down", "up"]  # closes in on turns 1 and 3 and 5
    assert play("gridnav-dense", wandering) == (0.5 * 3 / 6, False)
    assert play("gridnav-dense", ["left", "up", "nonsense", "up", "left", "left"]) == (0.0, False)
    assert play("gridnav", wandering) == (0.0, False)


def test_splits_are_disjoint_and_sized():
    seeds = {split: split_seeds(split) for split in SPLITS}
    assert {split: len(s) for split, s in seeds.items()} == SPLIT_SIZES
    assert len(set().union(*seeds.values())) == sum(SPLIT_SIZES.values())


@pytest.mark.parametrize("name", list(ENV_NAMES))
def test_every_split_matches_its_shipped_manifest(name):
    for split in SPLITS:
        for horizon in env_class(name).horizons:
            assert verify_split(name, split, horizon) == split_seeds(split)


def test_a_drifting_generator_fails_the_manifest(monkeypatch):
    original = sudoku_module.pattern_solution
    monkeypatch.setattr(sudoku_module, "pattern_solution", lambda box, rng: original(box, rng)[::-1].copy())
    with pytest.raises(ManifestMismatch, match="sudoku val/H10"):
        verify_split("sudoku", "val", 10)


def test_writing_the_manifest_reproduces_the_shipped_file(tmp_path, monkeypatch):
    shipped = splits_module.manifest_path("gridnav").read_text()
    monkeypatch.setattr(splits_module, "DATA_DIR", tmp_path)
    written = splits_module.write_manifest("gridnav")
    assert written.parent == tmp_path and written.read_text() == shipped
    splits_module.load_manifest.cache_clear()
