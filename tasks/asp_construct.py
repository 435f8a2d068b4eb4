"""Admissible sets, constructive: the heuristic ranks vectors for FunSearch's greedy builder.

An admissible set A(n, w) is a set of vectors in {0, 1, 2}^n, each with exactly w non-zero
entries, such that any three distinct vectors have a coordinate where their values are
{0, 1, 2}, {0, 0, 1} or {0, 0, 2}. As in FunSearch (and the MCTS-AHD task), the set is built in
its symmetric form: coordinates come in n/3 groups, each holding one of seven triples; a set of
such "pre-admissible" rows expands, by rotating the triples, into an admissible set. The
heuristic scores every candidate row (shown as its expanded length-n vector); the builder takes
the best-scored row that keeps the set admissible until none is left. Bigger sets are better;
references are the best known sizes (FunSearch).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from tasks.base import Heuristic, Instance, InstanceGroup, InvalidSolution, ShippedTask, SplitName
from tasks.checks import returned_number, returned_scores

TRIPLES = np.array([(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 2), (0, 2, 1), (1, 1, 1), (2, 2, 2)], dtype=np.int64)
"""The seven values a group of three coordinates may take in a symmetric construction."""

TRIPLE_WEIGHT = np.count_nonzero(TRIPLES, axis=1)
"""Non-zero entries contributed by each triple: [0, 1, 1, 2, 2, 3, 3]."""

TRIPLE_ROTATIONS = np.where(np.all(TRIPLES == TRIPLES[:, :1], axis=1), 1, 3)
"""Distinct cyclic rotations of each triple: constant triples have one, the others three."""

CODE_COUNT = len(TRIPLES)

SEPARATING = {(0, 1, 2), (0, 0, 1), (0, 0, 2)}
"""Sorted values at one coordinate that separate three vectors."""


def _rotations(triple: np.ndarray) -> list[np.ndarray]:
    return [np.roll(triple, shift) for shift in range(3)]


def _forbidden_table() -> np.ndarray:
    """FORBIDDEN[a, b, c]: some rotations of triples a, b, c leave all three coordinates unseparated.

    Rows expand into every combination of rotations, so three rows yield an unseparated triple of
    vectors exactly when every group is forbidden for their codes.
    """
    table = np.zeros((CODE_COUNT,) * 3, dtype=bool)
    for codes in itertools.product(range(CODE_COUNT), repeat=3):
        rotation_choices = itertools.product(*(_rotations(TRIPLES[code]) for code in codes))
        table[codes] = any(
            all(tuple(sorted(values)) not in SEPARATING for values in zip(*rotated)) for rotated in rotation_choices
        )
    return table


FORBIDDEN = _forbidden_table()

BEST_KNOWN_SIZE = {(12, 7): 792, (15, 10): 3003, (21, 15): 43596, (24, 17): 237984}
SPLIT_PARAMETERS: dict[SplitName, tuple[tuple[int, int], ...]] = {
    "search": ((15, 10),),
    "val": ((12, 7), (15, 10)),
    "test": ((12, 7), (15, 10), (21, 15), (24, 17)),
}


@functools.cache
def candidate_rows(n: int, w: int) -> np.ndarray:
    """All rows (one code per group) of total weight w, in lexicographic order."""
    codes = np.array(list(itertools.product(range(CODE_COUNT), repeat=n // 3)), dtype=np.int64)
    return codes[TRIPLE_WEIGHT[codes].sum(axis=1) == w]


def expanded_vector(row: np.ndarray) -> tuple[int, ...]:
    """The length-n vector a row stands for (its triples concatenated, unrotated)."""
    return tuple(int(v) for v in TRIPLES[row].ravel())


def expanded_size(rows: np.ndarray) -> int:
    """Number of vectors the pre-admissible rows expand into (product of rotation counts)."""
    return int(np.prod(TRIPLE_ROTATIONS[rows], axis=1).sum()) if len(rows) else 0


def _row_codes(rows: np.ndarray) -> np.ndarray:
    """Rows as base-7 integers, so a row can index a dense table of all 7^(n/3) rows."""
    powers = CODE_COUNT ** np.arange(rows.shape[-1] - 1, -1, -1)
    return rows @ powers


def _product_codes(choices: list[np.ndarray]) -> np.ndarray:
    """Base-7 codes of every row whose group j takes a value in choices[j]."""
    codes = np.zeros(1, dtype=np.int64)
    for allowed in choices:
        codes = (codes[:, None] * CODE_COUNT + allowed[None, :]).ravel()
    return codes


def greedy_admissible_rows(rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """FunSearch's builder: repeatedly take the best-scored row that keeps the set admissible.

    A row is struck out when it has the same per-group weights as a taken row, or when some
    taken pair and it leave every group unseparated. The struck rows of each step are products
    of per-group value sets, so they are enumerated directly instead of testing every row.
    """
    group_count = rows.shape[1]
    remaining_scores = np.full(CODE_COUNT**group_count, -np.inf)  # -inf marks "not a candidate (any more)"
    remaining_scores[_row_codes(rows)] = scores
    codes_of_weight = [np.flatnonzero(TRIPLE_WEIGHT == weight) for weight in range(4)]
    taken: list[np.ndarray] = []
    while True:
        best = int(np.argmax(remaining_scores))
        if remaining_scores[best] == -np.inf:
            break
        row = np.array(np.unravel_index(best, (CODE_COUNT,) * group_count), dtype=np.int64)
        struck = [_product_codes([codes_of_weight[TRIPLE_WEIGHT[v]] for v in row])]
        for earlier in taken:
            choices = [np.flatnonzero(FORBIDDEN[a, b]) for a, b in zip(earlier, row)]
            if all(len(c) for c in choices):
                struck.append(_product_codes(choices))
        remaining_scores[np.concatenate(struck)] = -np.inf
        taken.append(row)
    return np.array(taken, dtype=np.int64).reshape(-1, group_count)


def admissibility_violation(rows: np.ndarray, n: int, w: int) -> str | None:
    """Why the pre-admissible rows break the rules, or None when they are admissible."""
    group_count = n // 3
    if rows.ndim != 2 or rows.shape[1] != group_count or not np.issubdtype(rows.dtype, np.integer):
        return f"the set must be an integer array of shape (rows, {group_count}), got shape {rows.shape} of {rows.dtype}"
    if rows.size and (rows.min() < 0 or rows.max() >= CODE_COUNT):
        return f"row entries must be triple codes 0..{CODE_COUNT - 1}"
    weights = TRIPLE_WEIGHT[rows]
    bad_weight = np.flatnonzero(weights.sum(axis=1) != w)
    if bad_weight.size:
        return f"row {bad_weight[0]} has {weights[bad_weight[0]].sum()} non-zero entries, expected {w}"
    if len(np.unique(weights, axis=0)) != len(rows):
        return "two rows have the same non-zero pattern per group, so their expansions collide"
    for first in range(len(rows) - 2):
        later = rows[first + 1 :]
        unseparated = FORBIDDEN[rows[first][None, None, :], later[:, None, :], later[None, :, :]].all(axis=2)
        pairs = np.argwhere(np.triu(unseparated, k=1))
        if pairs.size:
            second, third = pairs[0] + first + 1
            return f"rows {first}, {second} and {third} are separated by no coordinate group"
    return None


class ASPConstruct(ShippedTask):
    name = "asp_construct"
    function_name = "priority"
    signature = "def priority(el: tuple[int, ...], n: int, w: int) -> float"
    description = (
        "Admissible set problem: build the largest set of vectors in {0, 1, 2}^n, each with "
        "exactly w non-zero entries, such that any three distinct vectors have a coordinate where "
        "their values are {0, 1, 2}, {0, 0, 1} or {0, 0, 2}. priority is called once for every "
        "candidate vector el (a tuple of n ints in {0, 1, 2}; n is a multiple of 3 and each block "
        "of three coordinates is one of (0,0,0), (0,0,1), (0,0,2), (0,1,2), (0,2,1), (1,1,1), "
        "(2,2,2)) and returns a float. A greedy builder then adds candidates in decreasing "
        "priority whenever they keep the set admissible, together with the cyclic rotations of "
        "their blocks. The goal is the largest final set."
    )
    reference_name = "best known size (FunSearch)"
    sense = "max"
    instance_seconds = 600.0  # set by the (24, 17) group (its timing: experiments/bench/RESULTS.md)

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return [InstanceGroup(f"n{n}_w{w}", [{"n": n, "w": w}]) for n, w in SPLIT_PARAMETERS[split]]

    async def drive(self, heuristic: Heuristic, instance: Instance) -> np.ndarray:
        rows = candidate_rows(int(instance["n"]), int(instance["w"]))
        scores = returned_scores(await heuristic(), self.function_name, len(rows))
        return greedy_admissible_rows(rows, scores)

    def answer(self, function: Callable[..., Any], state: Instance) -> np.ndarray:
        """Every candidate row's priority, in one call of the driver's."""
        n, w = int(state["n"]), int(state["w"])
        return np.array(
            [returned_number(function(expanded_vector(row), n, w), self.function_name) for row in candidate_rows(n, w)]
        )

    def score(self, instance: Instance, solution: Any) -> float:
        rows = np.asarray(solution)
        violation = admissibility_violation(rows, int(instance["n"]), int(instance["w"]))
        if violation is not None:
            raise InvalidSolution(violation)
        return float(expanded_size(rows))

    def reference_objective(self, instance: Instance) -> float:
        return float(BEST_KNOWN_SIZE[(int(instance["n"]), int(instance["w"]))])
