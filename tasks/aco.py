"""Vectorised Ant Colony Optimisation engine shared by the TSP, CVRP and offline-BPP ACO tasks.

The engine follows the Ant System used by DeepACO, ReEvo and MCTS-AHD: pheromone starts at 1,
every ant of an iteration deposits on the edges it used, pheromone evaporates by a constant
factor, and an ant moves to a candidate with probability proportional to
``pheromone**alpha * prior**beta``, where the prior is the matrix a heuristic returned.
All ants of an iteration advance together as rows of numpy arrays, and all randomness comes
from one ``np.random.Generator`` seeded by the caller, so a run is reproducible bit for bit.

Departures from the published code, all deliberate: every colony floors its pheromone (the
published CVRP colony does, the TSP and BPP ones do not; it only matters after ~200 TSP
iterations and then by less than 1e-8 in probability); every prior is scaled to a maximum of 1
before its floor is applied (published: TSP/CVRP add 1e-9 to the raw prior, BPP scales); and a
CVRP ant's cost is its true route length, where the published colony also charged the ants that
finished early one distance unit (the matrix's diagonal) per step spent waiting at the depot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tasks.base import InvalidSolution

SAMPLING_BLOCK = 32
"""Columns per block in :func:`sample_rows`."""

PHEROMONE_MIN = 1e-10
"""Pheromone never decays below this, so no edge becomes unreachable through underflow."""


@dataclass(frozen=True)
class ColonySettings:
    """The knobs of one ACO run (published values live in the task modules)."""

    n_ants: int
    n_iterations: int
    decay: float
    """Fraction of the pheromone kept after each iteration (1 - evaporation rate)."""
    alpha: float = 1.0
    beta: float = 1.0
    prior_floor: float = 1e-9
    """Smallest weight of a prior entry after scaling the prior to a maximum of 1: zeros
    the heuristic uses to prune edges stay possible, so an ant can never get stuck."""

    def __post_init__(self) -> None:
        if self.n_ants < 1 or self.n_iterations < 1:
            raise ValueError(
                f"a colony needs at least one ant and one iteration, got {self.n_ants} and {self.n_iterations}"
            )
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay is the fraction of pheromone kept, in (0, 1], got {self.decay}")


class AntBatch(NamedTuple):
    """What one iteration's ants produced."""

    solutions: np.ndarray
    """One row per ant, in the problem's own encoding."""
    costs: np.ndarray
    """The objective of each ant (lower is better)."""
    deposit: np.ndarray
    """Pheromone the iteration adds, shape of the pheromone matrix."""


AntWalk = Callable[[np.ndarray, np.random.Generator], AntBatch]
"""Builds one iteration's solutions from the move weights ``pheromone**alpha * prior**beta``."""


def check_prior(prior: object, size: int) -> np.ndarray:
    """Validate a heuristic's prior matrix and return it as float64.

    A prior must be a finite, non-negative numeric ``(size, size)`` numpy array in which every
    row gives some weight to another node (the diagonal is never used), since an all-zero row
    leaves an ant nowhere to go.
    """
    if not isinstance(prior, np.ndarray):
        raise InvalidSolution(f"heuristics returned {type(prior).__name__}, expected a numpy array")
    if prior.shape != (size, size):
        raise InvalidSolution(f"heuristics returned shape {prior.shape}, expected ({size}, {size})")
    if prior.dtype == np.bool_ or not np.issubdtype(prior.dtype, np.number):
        raise InvalidSolution(f"heuristics returned dtype {prior.dtype}, expected a real numeric dtype")
    if np.iscomplexobj(prior):
        raise InvalidSolution(f"heuristics returned dtype {prior.dtype}, expected a real numeric dtype")
    values = prior.astype(np.float64)
    for label, bad in (("NaN", np.isnan(values)), ("infinite", np.isinf(values)), ("negative", values < 0)):
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InvalidSolution(f"heuristics returned {int(bad.sum())} {label} entries (first at {list(first)})")
    off_diagonal = values.copy()
    np.fill_diagonal(off_diagonal, 0.0)
    empty_rows = np.flatnonzero(~off_diagonal.any(axis=1))
    if empty_rows.size:
        raise InvalidSolution(
            f"heuristics returned {empty_rows.size} rows with no positive off-diagonal entry "
            f"(first: row {int(empty_rows[0])})"
        )
    return values


def run_colony(prior: np.ndarray, settings: ColonySettings, seed: int, walk: AntWalk) -> np.ndarray:
    """Run ``settings.n_iterations`` iterations of Ant System and return the best ant's solution.

    ``prior`` must already have passed :func:`check_prior`.
    """
    rng = np.random.default_rng(seed)
    scaled_prior = np.maximum(prior / prior.max(), settings.prior_floor)
    prior_term = scaled_prior**settings.beta
    pheromone = np.ones_like(prior_term)
    best_solution, best_cost = np.empty(0), np.inf
    for _ in range(settings.n_iterations):
        weights = prior_term * pheromone**settings.alpha
        batch = walk(weights, rng)
        leader = int(np.argmin(batch.costs))
        if batch.costs[leader] < best_cost:
            best_solution, best_cost = batch.solutions[leader].copy(), batch.costs[leader]
        pheromone = np.maximum(pheromone * settings.decay + batch.deposit, PHEROMONE_MIN)
    return best_solution


def sample_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw one column per row with probability proportional to the row's weights.

    Two-level inverse-CDF sampling: a block of ``SAMPLING_BLOCK`` columns is drawn by its total,
    then a column inside it. numpy's cumulative sum is sequential and would otherwise dominate
    an ant's step; block totals are vectorised reductions. A zero-weight column (a visited node,
    an item that does not fit) is never returned. A row without positive weight returns column 0.
    Short rows (TSP50, CVRP100) are cheaper in one level.
    """
    n_rows, n_columns = weights.shape
    if n_columns <= 4 * SAMPLING_BLOCK:
        return _inverse_cdf(weights, rng.random(n_rows))
    n_blocks = -(-n_columns // SAMPLING_BLOCK)
    padded = np.zeros((n_rows, n_blocks * SAMPLING_BLOCK))
    padded[:, :n_columns] = weights
    blocks = padded.reshape(n_rows, n_blocks, SAMPLING_BLOCK)
    block = _inverse_cdf(blocks.sum(axis=2), rng.random(n_rows))
    column = _inverse_cdf(blocks[np.arange(n_rows), block], rng.random(n_rows))
    return block * SAMPLING_BLOCK + column


def _inverse_cdf(weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Per row, the first column whose cumulative weight exceeds ``uniforms * total``; the draw is
    kept strictly below the total, so the column found always has a positive weight."""
    cumulative = np.cumsum(weights, axis=1)
    totals = cumulative[:, -1]
    draws = np.minimum(uniforms * totals, np.nextafter(totals, 0.0))
    return np.count_nonzero(cumulative <= draws[:, None], axis=1)


def tsp_colony(distance: np.ndarray, prior: np.ndarray, settings: ColonySettings, seed: int) -> list[int]:
    """Best tour (a permutation of the nodes) found by ACO; ``distance`` has a zero diagonal."""
    n, n_ants = len(distance), settings.n_ants
    ants = np.arange(n_ants)

    def walk(weights: np.ndarray, rng: np.random.Generator) -> AntBatch:
        tours = np.empty((n_ants, n), dtype=np.int64)
        tours[:, 0] = rng.integers(n, size=n_ants)
        unvisited = np.ones((n_ants, n), dtype=bool)
        unvisited[ants, tours[:, 0]] = False
        for step in range(1, n):
            tours[:, step] = sample_rows(weights[tours[:, step - 1]] * unvisited, rng)
            unvisited[ants, tours[:, step]] = False
        following = np.roll(tours, -1, axis=1)
        lengths = distance[tours, following].sum(axis=1)
        deposit = _edge_deposit(tours, following, np.repeat(1.0 / lengths, n), n)
        return AntBatch(tours, lengths, deposit + deposit.T)

    return run_colony(prior, settings, seed, walk).tolist()


def cvrp_colony(
    distance: np.ndarray,
    demands: np.ndarray,
    capacity: float,
    prior: np.ndarray,
    settings: ColonySettings,
    seed: int,
) -> list[list[int]]:
    """Best set of routes found by ACO; node 0 is the depot, each route is ``[0, ..., 0]``.

    An ant leaves the depot, may return to it whenever it stands at a customer, must return
    when no unvisited customer fits its remaining capacity, and may not stay at the depot while
    customers remain. Ants that finished wait at the depot until the slowest one is done.
    """
    n, n_ants = len(distance), settings.n_ants
    ants = np.arange(n_ants)
    max_length = 2 * (n - 1) + 1

    def walk(weights: np.ndarray, rng: np.random.Generator) -> AntBatch:
        paths = np.zeros((n_ants, max_length), dtype=np.int64)
        unvisited = np.ones((n_ants, n), dtype=bool)
        unvisited[:, 0] = False
        load = np.zeros(n_ants)
        current = paths[:, 0]
        for step in range(1, max_length):
            working = unvisited.any(axis=1) | (current != 0)
            if not working.any():
                break
            allowed = unvisited & (demands <= (capacity - load)[:, None])
            allowed[:, 0] = current != 0
            chosen = np.where(working, sample_rows(weights[current] * allowed, rng), 0)
            paths[:, step] = chosen
            unvisited[ants, chosen] = False
            load = np.where(chosen == 0, 0.0, load + demands[chosen])
            current = chosen
        sources, targets = paths[:, :-1], paths[:, 1:]
        lengths = distance[sources, targets].sum(axis=1)
        moved = sources != targets
        per_edge = np.broadcast_to((1.0 / lengths)[:, None], sources.shape)
        deposit = _edge_deposit(sources[moved], targets[moved], per_edge[moved], n)
        return AntBatch(paths, lengths, deposit)

    best_path = run_colony(prior, settings, seed, walk)
    return _split_at_depot(best_path)


def bpp_colony(
    demands: np.ndarray, capacity: float, prior: np.ndarray, settings: ColonySettings, seed: int
) -> list[int]:
    """Best bin assignment (``assignment[item] = bin``) found by ACO.

    The ACO of Levine and Ducatelle as used by ReEvo: an ant fills one bin at a time; the first
    item of a bin is drawn uniformly, each next item in proportion to its mean weight towards the
    items already in the bin (plus 1e-5) among the items that still fit; a bin is closed when no
    item fits. Ants are ranked by bin count, and deposit on every same-bin item pair in
    proportion to the mean squared fill ratio of their bins divided by the number of ants.
    """
    n, n_ants = len(demands), settings.n_ants
    ants = np.arange(n_ants)

    def walk(weights: np.ndarray, rng: np.random.Generator) -> AntBatch:
        assignment = np.empty((n_ants, n), dtype=np.int64)
        unplaced = np.ones((n_ants, n), dtype=bool)
        current_bin = np.zeros(n_ants, dtype=np.int64)
        room = np.full(n_ants, float(capacity))
        affinity = np.zeros((n_ants, n))
        in_bin = np.zeros(n_ants)
        for _ in range(n):
            fits = unplaced & (demands <= room[:, None])
            full = ~fits.any(axis=1)
            if full.any():
                current_bin[full] += 1
                room[full] = capacity
                affinity[full] = 0.0
                in_bin[full] = 0
                fits[full] = unplaced[full]
            # (mean affinity + 1e-5) scaled by the bin's item count, which leaves the draw
            # unchanged; an empty bin has zero affinity, so its first item is drawn uniformly
            preference = affinity + 1e-5 * np.maximum(in_bin, 1)[:, None]
            chosen = sample_rows(preference * fits, rng)
            assignment[ants, chosen] = current_bin
            unplaced[ants, chosen] = False
            room -= demands[chosen]
            affinity += weights[chosen]
            in_bin += 1
        n_bins = current_bin + 1
        loads = np.zeros((n_ants, int(n_bins.max())))
        np.add.at(loads, (np.repeat(ants, n), assignment.ravel()), np.tile(demands, n_ants).astype(float))
        fill_squares = ((loads / capacity) ** 2).sum(axis=1)
        fitness = fill_squares / n_bins
        deposit = _same_bin_deposit(assignment, n_bins, fitness / n_ants)
        return AntBatch(assignment, n_bins.astype(float), deposit)

    return run_colony(prior, settings, seed, walk).tolist()


def _edge_deposit(sources: np.ndarray, targets: np.ndarray, amounts: np.ndarray, n: int) -> np.ndarray:
    """Sum ``amounts`` onto the directed edges ``sources[k] -> targets[k]`` of an (n, n) matrix."""
    flat = sources.ravel() * n + targets.ravel()
    return np.bincount(flat, weights=amounts.ravel(), minlength=n * n).reshape(n, n)


def _same_bin_deposit(assignment: np.ndarray, n_bins: np.ndarray, per_ant: np.ndarray) -> np.ndarray:
    """Add ``per_ant[a]`` to entry (i, j) for every item pair (i and j, i == j included) that
    ant ``a`` put in the same bin; cost is linear in the number of such pairs, not n**2."""
    n_ants, n = assignment.shape
    first_bin_of_ant = np.cumsum(n_bins) - n_bins
    bins = (assignment + first_bin_of_ant[:, None]).ravel()
    order = np.argsort(bins, kind="stable")
    items = np.tile(np.arange(n), n_ants)[order]
    bins = bins[order]
    bin_sizes = np.bincount(bins)
    bin_starts = np.cumsum(bin_sizes) - bin_sizes
    partners = bin_sizes[bins]
    left = np.repeat(np.arange(len(items)), partners)
    offset_in_bin = np.arange(len(left)) - np.repeat(np.cumsum(partners) - partners, partners)
    right = bin_starts[bins[left]] + offset_in_bin
    amounts = np.repeat(per_ant, n)[order][left]
    return _edge_deposit(items[left], items[right], amounts, n)


def _split_at_depot(path: np.ndarray) -> list[list[int]]:
    """Turn one ant's depot-separated walk ``0 a b 0 c 0 0 ...`` into routes ``[[0,a,b,0],[0,c,0]]``."""
    routes, route = [], [0]
    for node in path[1:].tolist():
        if node == 0:
            if len(route) > 1:
                routes.append(route + [0])
            route = [0]
        else:
            route.append(node)
    return routes
