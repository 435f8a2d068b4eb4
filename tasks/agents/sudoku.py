"""Sudoku as the reference method builds it (Agentic ESOpt's released agent code), plus what a 135M model can learn from.

A pattern solution with shuffled bands, rows within bands and digits; then H random blanks (no
uniqueness check, as in the reference). One action per turn, ``set <row> <col> <value>`` with 1-based
coordinates. Setting a given or an already filled cell, or text that is not an action, is refused
with feedback and costs a turn; a wrong digit in an empty cell is accepted and stays. The episode
ends when the board is full or after 3H turns. Reward 1 iff the board is full and valid with the
givens intact (terminal only).

The reference's binary reward gives a 135M model no signal (random digits solve a 5-blank 9x9
puzzle with probability ~1.7e-5), so two easier signals come with it: a dense reward (the fraction
of blanks holding the solution's digit; a full valid board scores 1) and a 4x4 board.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from tasks.agents.base import AgentEnv, Outcome

Action = tuple[int, int, int]
"""(row, col, value), 1-based as written by the policy."""

_SET = re.compile(r"\bset\W{0,3}(\d+)\W{1,3}(\d+)\W{1,3}(\d+)", re.IGNORECASE)


def pattern_solution(box: int, rng: np.random.Generator) -> np.ndarray:
    """A valid (box^2 x box^2) grid: the cyclic pattern, with bands, rows in bands and digits shuffled."""
    side = box * box
    bands = rng.permutation(box)
    rows = [band * box + row for band in bands for row in rng.permutation(box)]
    digits = rng.permutation(side) + 1
    pattern = [[(box * (r % box) + r // box + c) % side for c in range(side)] for r in rows]
    return digits[np.asarray(pattern)]


def board_conflicts(board: np.ndarray, box: int) -> list[str]:
    """Every row, column or box of a full board that does not hold each digit once."""
    side = box * box
    expected = set(range(1, side + 1))
    problems = [f"row {r + 1}" for r in range(side) if set(board[r].tolist()) != expected]
    problems += [f"column {c + 1}" for c in range(side) if set(board[:, c].tolist()) != expected]
    for br in range(box):
        for bc in range(box):
            block = board[br * box : (br + 1) * box, bc * box : (bc + 1) * box]
            if set(block.reshape(-1).tolist()) != expected:
                problems.append(f"box {br * box + bc + 1}")
    return problems


class Sudoku(AgentEnv[Action]):
    """9x9 Sudoku with the reference's binary reward."""

    name: ClassVar[str] = "sudoku"
    description: ClassVar[str] = "9x9 Sudoku with H blanks; reward 1 iff solved (the reference's setting)"
    horizons: ClassVar[tuple[int, ...]] = (5, 10, 15, 20)
    horizon_meaning: ClassVar[str] = "blank cells"
    action_format: ClassVar[str] = "set <row> <col> <value>"
    box: ClassVar[int] = 3
    dense: ClassVar[bool] = False

    @property
    def side(self) -> int:
        return self.box * self.box

    def _setup(self, rng: np.random.Generator) -> None:
        self.solution = pattern_solution(self.box, rng)
        blanks = rng.permutation(self.side * self.side)[: self.horizon]
        self.givens = np.ones((self.side, self.side), dtype=bool)
        self.givens.reshape(-1)[blanks] = False
        self.board = np.where(self.givens, self.solution, 0)

    def instance(self) -> dict[str, Any]:
        return {"solution": self.solution.tolist(), "givens": self.givens.astype(int).tolist()}

    def _parse(self, text: str) -> Action | None:
        match = _SET.search(text)
        return None if match is None else (int(match[1]), int(match[2]), int(match[3]))

    def _apply(self, action: Action) -> tuple[bool, str]:
        row, col, value = action
        side = self.side
        if not (1 <= row <= side and 1 <= col <= side):
            return False, f"cell ({row}, {col}) is off the board; rows and columns go from 1 to {side}"
        if not 1 <= value <= side:
            return False, f"value {value} is not a digit from 1 to {side}"
        if self.givens[row - 1, col - 1]:
            return False, f"cell ({row}, {col}) is a given and cannot change"
        if self.board[row - 1, col - 1]:
            return False, f"cell ({row}, {col}) is already filled with {self.board[row - 1, col - 1]}"
        self.board[row - 1, col - 1] = value
        return True, f"placed {value} at ({row}, {col})"

    def _finished(self) -> Outcome | None:
        if (self.board == 0).any():
            return None
        conflicts = board_conflicts(self.board, self.box)
        intact = bool((self.board[self.givens] == self.solution[self.givens]).all())
        if not conflicts and intact:
            return Outcome(1.0, True, "solved: the board is full and valid")
        return Outcome(self._dense_reward(), False, f"board full but invalid: {', '.join(conflicts[:3])} conflict")

    def _partial(self) -> tuple[float, str]:
        empty = int((self.board == 0).sum())
        return self._dense_reward(), f"{empty} of {self.horizon} blank cells still empty"

    def _dense_reward(self) -> float:
        """0 under the binary reward; else the fraction of blanks holding the solution's digit."""
        if not self.dense:
            return 0.0
        blanks = ~self.givens
        return float((self.board[blanks] == self.solution[blanks]).mean())

    def _rules(self) -> str:
        side, box = self.side, self.box
        return (
            f"Solve this {side}x{side} Sudoku. Every row, every column and every {box}x{box} box must hold "
            f"each digit 1-{side} exactly once. Fill one empty cell per turn. Rows and columns are numbered "
            f"1-{side}; `.` marks an empty cell. Given cells cannot change, and a placed digit stays."
        )

    def _render(self) -> str:
        empty = [f"({r + 1}, {c + 1})" for r, c in zip(*np.nonzero(self.board == 0), strict=True)]
        return (
            f"Original board:\n{self._grid(np.where(self.givens, self.solution, 0))}\n\n"
            f"Current board:\n{self._grid(self.board)}\n\n"
            f"Empty cells (row, col): {', '.join(empty) if empty else 'none'}"
        )

    def _grid(self, board: np.ndarray) -> str:
        header = "    " + " ".join(str(c + 1) for c in range(self.side))
        lines = [header]
        for r in range(self.side):
            cells = " ".join(str(v) if v else "." for v in board[r])
            lines.append(f"{r + 1:>2}  {cells}")
        return "\n".join(lines)


class SudokuDense(Sudoku):
    name: ClassVar[str] = "sudoku-dense"
    description: ClassVar[str] = "9x9 Sudoku with H blanks; reward = fraction of blanks correct"
    dense: ClassVar[bool] = True
    shares_instances_with: ClassVar[str | None] = "sudoku"


class Sudoku4(Sudoku):
    name: ClassVar[str] = "sudoku4"
    description: ClassVar[str] = "4x4 Sudoku with H blanks; reward 1 iff solved"
    horizons: ClassVar[tuple[int, ...]] = (2, 4, 6, 8)
    box: ClassVar[int] = 2


class Sudoku4Dense(Sudoku4):
    name: ClassVar[str] = "sudoku4-dense"
    description: ClassVar[str] = "4x4 Sudoku with H blanks; reward = fraction of blanks correct"
    dense: ClassVar[bool] = True
    shares_instances_with: ClassVar[str | None] = "sudoku4"
