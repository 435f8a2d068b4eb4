"""Grid navigation: walk from a start room to a goal room H moves away, with feedback after every move.

Why this one beside Sudoku: a 135M model makes progress on it (experiments/agents/RESULTS.md), and
its horizon is literal: H is the length of the shortest path, the turn budget is 3H, and every
wasted move makes the goal harder to reach. Success needs one reading skill (compare two coordinates
and pick the direction that closes the gap), which the reward checks end to end and which weights can
learn. Moving into the outer wall is refused with feedback and costs a turn.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from tasks.agents.base import AgentEnv, Outcome

DIRECTIONS: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_DIRECTION = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)


class GridNav(AgentEnv[str]):
    """A square grid of rooms with no obstacles; positions are (row, column), 1-based."""

    name: ClassVar[str] = "gridnav"
    description: ClassVar[str] = "walk to a goal room H moves away on a 9x9 grid; reward 1 on arrival"
    horizons: ClassVar[tuple[int, ...]] = (2, 4, 6, 8)
    horizon_meaning: ClassVar[str] = "moves on the shortest path"
    action_format: ClassVar[str] = "move <up|down|left|right>"
    size: ClassVar[int] = 9

    def _setup(self, rng: np.random.Generator) -> None:
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        starts = [cell for cell in cells if self._at_distance(cell)]
        self.start = starts[rng.integers(len(starts))]
        goals = self._at_distance(self.start)
        self.goal = goals[rng.integers(len(goals))]
        self.position = self.start

    def _at_distance(self, cell: tuple[int, int]) -> list[tuple[int, int]]:
        r, c = cell
        return [
            (gr, gc) for gr in range(self.size) for gc in range(self.size) if abs(gr - r) + abs(gc - c) == self.horizon
        ]

    def instance(self) -> dict[str, Any]:
        return {"size": self.size, "start": list(self.start), "goal": list(self.goal)}

    def _parse(self, text: str) -> str | None:
        match = _DIRECTION.search(text)
        return None if match is None else match[1].lower()

    def _apply(self, action: str) -> tuple[bool, str]:
        dr, dc = DIRECTIONS[action]
        row, col = self.position[0] + dr, self.position[1] + dc
        if not (0 <= row < self.size and 0 <= col < self.size):
            return False, f"a wall blocks the way {action}; you stay at {_show(self.position)}"
        self.position = (row, col)
        return True, f"you moved {action} to {_show(self.position)}"

    def _finished(self) -> Outcome | None:
        if self.position == self.goal:
            return Outcome(1.0, True, f"reached the goal in {self._turn} moves (shortest: {self.horizon})")
        return None

    def _partial(self) -> tuple[float, str]:
        distance = self._distance()
        return 0.0, f"ended {distance} moves from the goal"

    def _distance(self) -> int:
        return abs(self.position[0] - self.goal[0]) + abs(self.position[1] - self.goal[1])

    def _rules(self) -> str:
        n = self.size
        return (
            f"You are in a {n}x{n} grid of rooms. Rows are numbered 1-{n} from top to bottom and columns "
            f"1-{n} from left to right. Moving up lowers the row number, down raises it, left lowers the "
            f"column number, right raises it. Reach the goal room in as few moves as you can."
        )

    def _render(self) -> str:
        return f"You are at {_show(self.position)}. The goal is at {_show(self.goal)}."


class GridNavDense(GridNav):
    """The same instances with a training signal on failure: the share of turns whose move closed the
    distance to the goal, halved, so every good move pays and arriving (1.0) pays most. Success, the
    held-out measure, is unchanged: only what ES or GRPO train on differs."""

    name: ClassVar[str] = "gridnav-dense"
    description: ClassVar[str] = "gridnav, failures paid 0.5 x the share of turns that closed the distance"
    shares_instances_with: ClassVar[str | None] = "gridnav"

    def _setup(self, rng: np.random.Generator) -> None:
        super()._setup(rng)
        self._closing_moves = 0

    def _apply(self, action: str) -> tuple[bool, str]:
        before = self._distance()
        valid, feedback = super()._apply(action)
        self._closing_moves += self._distance() < before
        return valid, feedback

    def _partial(self) -> tuple[float, str]:
        reward, detail = super()._partial()
        return reward + 0.5 * self._closing_moves / self._turn, f"{detail}; {self._closing_moves} moves closed in"


def _show(cell: tuple[int, int]) -> str:
    return f"row {cell[0] + 1}, column {cell[1] + 1}"
