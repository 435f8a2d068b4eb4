"""The ACO engine and the three ACO tasks: priors and solutions are validated, runs are seeded,
instance sets follow the published generators, and plain ACO lands near the published TSP50 figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tasks import InvalidSolution, get_task
from tasks.aco import ColonySettings, _same_bin_deposit, check_prior, sample_rows, tsp_colony
from tasks.aco_task import protocol_fields
from tasks.tsp_construct import distance_matrix


def inverse_distance(distances: np.ndarray, *_: object) -> np.ndarray:
    return 1.0 / distances


def size_prior(demand: np.ndarray, capacity: int) -> np.ndarray:
    return np.tile(demand / demand.max(), (len(demand), 1))


def small_tsp(seed: int = 0, cities: int = 12) -> dict:
    coords = np.random.default_rng(seed).random((cities, 2))
    return {"coords": coords, **protocol_fields(seed, 10)}


def small_cvrp(seed: int = 0, customers: int = 15) -> dict:
    rng = np.random.default_rng(seed)
    coords = np.vstack([[0.5, 0.5], rng.random((customers, 2))])
    demands = np.concatenate([[0], rng.integers(1, 10, customers)])
    return {"coords": coords, "demands": demands, "capacity": np.int64(20), **protocol_fields(seed, 10)}


def small_bpp(seed: int = 0, items: int = 40) -> dict:
    demands = np.random.default_rng(seed).integers(20, 101, items)
    return {"demands": demands, "capacity": np.int64(150), **protocol_fields(seed, 5)}


# --- priors -----------------------------------------------------------------------------------


def _nan_at_2_3() -> np.ndarray:
    prior = np.ones((4, 4))
    prior[2, 3] = np.nan
    return prior


def _zero_row_1() -> np.ndarray:
    prior = np.ones((4, 4))
    prior[1] = 0.0
    prior[1, 1] = 5.0  # the diagonal does not count as a way out
    return prior


@pytest.mark.parametrize(
    ("prior", "reason"),
    [
        ([[1.0] * 4] * 4, "returned list, expected a numpy array"),
        (np.ones((4, 3)), "shape (4, 3), expected (4, 4)"),
        (np.ones(16), "shape (16,), expected (4, 4)"),
        (np.ones((4, 4), dtype=bool), "dtype bool"),
        (np.full((4, 4), "a"), "dtype <U1"),
        (np.ones((4, 4), dtype=object), "dtype object"),
        (np.ones((4, 4), dtype=complex), "dtype complex128"),
        (_nan_at_2_3(), "1 NaN entries (first at [2, 3])"),
        (np.full((4, 4), np.inf), "16 infinite entries (first at [0, 0])"),
        (-np.ones((4, 4)), "16 negative entries"),
        (_zero_row_1(), "1 rows with no positive off-diagonal entry (first: row 1)"),
    ],
)
def test_bad_priors_are_rejected_with_their_reason(prior: object, reason: str) -> None:
    with pytest.raises(InvalidSolution) as caught:
        check_prior(prior, 4)
    assert reason in str(caught.value)


def test_integer_prior_with_zeros_off_a_row_is_accepted_as_float() -> None:
    prior = np.eye(4, k=1, dtype=np.int32) + np.eye(4, k=-3, dtype=np.int32)
    checked = check_prior(prior, 4)
    assert checked.dtype == np.float64 and np.array_equal(checked, prior)


@pytest.mark.parametrize(
    ("task_name", "instance", "heuristic", "reason"),
    [
        ("tsp_aco", small_tsp(), lambda d: d[:-1], "shape (11, 12), expected (12, 12)"),
        ("cvrp_aco", small_cvrp(), lambda d, c, q, cap: -d, "negative entries"),
        ("bpp_aco", small_bpp(), lambda q, cap: np.full((40, 40), np.nan), "1600 NaN entries"),
    ],
)
def test_construct_validates_the_heuristic_output(task_name, instance, heuristic, reason) -> None:
    with pytest.raises(InvalidSolution, match=reason.replace("(", r"\(").replace(")", r"\)")):
        get_task(task_name).construct(heuristic, instance)


def test_heuristic_gets_copies_it_may_modify() -> None:
    instance = small_cvrp()
    before = {key: np.copy(value) for key, value in instance.items()}

    def vandal(distances, coordinates, demands, capacity):
        prior = 1.0 / distances
        distances[:] = coordinates[:] = demands[:] = -1
        return prior

    get_task("cvrp_aco").construct(vandal, instance)
    assert all(np.array_equal(instance[key], before[key]) for key in before)


# --- solutions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("solution", "reason"),
    [
        (list(range(11)), "lists 11 cities, expected 12"),
        ([0] + list(range(11)), "not a permutation"),
        (list(range(1, 13)), "not a permutation"),
        ([float(i) for i in range(12)], "integers"),
        ([True] * 12, "integers"),
        ("0123456789ab", "got str"),
        ([[0, 1], [2, 3]], "flat sequence"),
    ],
)
def test_bad_tours_are_rejected(solution: object, reason: str) -> None:
    with pytest.raises(InvalidSolution, match=reason):
        get_task("tsp_aco").score(small_tsp(), solution)


def test_tour_length_is_the_closed_euclidean_length() -> None:
    instance = {"coords": np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0]]), **protocol_fields(0, 1)}
    assert get_task("tsp_aco").score(instance, [0, 1, 2]) == pytest.approx(12.0)


def _one_route_per_customer(customers: int) -> list[list[int]]:
    return [[0, c, 0] for c in range(1, customers + 1)]


@pytest.mark.parametrize(
    ("solution", "reason"),
    [
        ([[1, 2, 0]] + _one_route_per_customer(15)[2:], "route 0 must start and end at the depot"),
        ([[0, 1, 2]] + _one_route_per_customer(15)[2:], "route 0 must start and end at the depot"),
        ([[0, 0]] + _one_route_per_customer(15), "route 0 must start and end at the depot"),
        ([[0, 1, 0, 2, 0]] + _one_route_per_customer(15)[2:], "route 0 passes through the depot"),
        (_one_route_per_customer(15)[:-1], "customer 15 is visited 0 times"),
        (_one_route_per_customer(15) + [[0, 4, 0]], "customer 4 is visited 2 times"),
        (_one_route_per_customer(15) + [[0, 16, 0]], "route 15 names a node outside 1..15"),
        ([[0, *range(1, 16), 0]], "route 0 carries"),
        ("routes", "list of routes, got str"),
        (np.zeros((3, 3), dtype=int), "list of routes, got ndarray"),
        (7, "list of routes, got int"),
        ([[0, 1.5, 0]], "route 0 must be a flat sequence of integers"),
    ],
)
def test_bad_routes_are_rejected(solution: object, reason: str) -> None:
    with pytest.raises(InvalidSolution, match=reason):
        get_task("cvrp_aco").score(small_cvrp(), solution)


def test_route_length_counts_every_depot_round_trip() -> None:
    instance = small_cvrp()
    radii = np.linalg.norm(instance["coords"][1:] - instance["coords"][0], axis=1)
    assert get_task("cvrp_aco").score(instance, _one_route_per_customer(15)) == pytest.approx(2 * radii.sum())


@pytest.mark.parametrize(
    ("solution", "reason"),
    [
        (list(range(39)), "covers 39 items, expected 40"),
        ([-1] + list(range(39)), "item 0 has a negative bin number"),
        ([0] * 40, "over the capacity 150"),
        ([0.0] * 40, "integers"),
        (None, "flat sequence"),
    ],
)
def test_bad_bin_assignments_are_rejected(solution: object, reason: str) -> None:
    with pytest.raises(InvalidSolution, match=reason):
        get_task("bpp_aco").score(small_bpp(), solution)


def test_bin_count_ignores_bin_labels() -> None:
    instance = {"demands": np.array([100, 50, 70, 80]), "capacity": np.int64(150), **protocol_fields(0, 1)}
    assert get_task("bpp_aco").score(instance, [7, 7, 42, 3]) == 3.0


# --- engine ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [7, 50, 129, 1000])
def test_sampling_follows_the_weights_and_never_picks_a_zero(columns: int) -> None:
    rng = np.random.default_rng(columns)
    weights = rng.random(columns) * (rng.random(columns) < 0.5)
    weights[columns // 2] = 1e-12 if weights.sum() else 1.0
    draws = 4000
    picks = sample_rows(np.tile(weights, (draws, 1)), rng)
    assert np.all(weights[picks] > 0)
    frequencies = np.bincount(picks, minlength=columns) / draws
    expected = weights / weights.sum()
    assert np.all(np.abs(frequencies - expected) <= 5 * np.sqrt(expected / draws) + 1e-3)


@pytest.mark.parametrize(("ants", "iterations", "decay"), [(0, 10, 0.9), (10, 0, 0.9), (10, 10, 0.0), (10, 10, 1.5)])
def test_colony_settings_reject_impossible_runs(ants: int, iterations: int, decay: float) -> None:
    with pytest.raises(ValueError):
        ColonySettings(ants, iterations, decay)


def test_same_bin_deposit_matches_pairwise_definition() -> None:
    rng = np.random.default_rng(3)
    assignment = rng.integers(0, 6, size=(4, 30))
    assignment[:, 0] = 5  # every ant uses bins 0..5
    per_ant = rng.random(4)
    expected = sum(w * (a[:, None] == a[None, :]) for w, a in zip(per_ant, assignment))
    assert np.allclose(_same_bin_deposit(assignment, assignment.max(axis=1) + 1, per_ant), expected)


@pytest.mark.parametrize(
    ("task_name", "instance", "heuristic"),
    [
        ("tsp_aco", small_tsp(), inverse_distance),
        ("cvrp_aco", small_cvrp(), inverse_distance),
        ("bpp_aco", small_bpp(), size_prior),
    ],
)
def test_runs_are_reproducible_under_their_seed_and_differ_across_seeds(task_name, instance, heuristic) -> None:
    task = get_task(task_name)
    first, again = task.construct(heuristic, instance), task.construct(heuristic, dict(instance))
    other = task.construct(heuristic, {**instance, "aco_seed": np.int64(99)})
    assert first == again
    assert first != other
    task.score(instance, first)


def test_more_iterations_never_hurt_on_the_same_seed_stream() -> None:
    instance = small_tsp(cities=30)
    distances = distance_matrix(instance["coords"])
    prior = check_prior(inverse_distance(np.where(distances == 0, 1.0, distances)), 30)

    def best_length(iterations: int) -> float:
        tour = tsp_colony(distances, prior, ColonySettings(10, iterations, 0.9), seed=5)
        return get_task("tsp_aco").score(instance, tour)

    assert best_length(40) <= best_length(10) <= best_length(1)


# --- instances and references ---------------------------------------------------------------------


def test_published_search_sets() -> None:
    (tsp,) = get_task("tsp_aco").groups("search")
    assert (tsp.label, len(tsp.instances), tsp.instances[0]["coords"].shape) == ("n50", 5, (50, 2))
    assert np.array_equal(tsp.instances[0]["coords"], np.random.RandomState(1234).rand(5, 50, 2)[0])
    (cvrp,) = get_task("cvrp_aco").groups("search")
    assert len(cvrp.instances) == 10
    for instance in cvrp.instances:
        assert np.array_equal(instance["coords"][0], [0.5, 0.5]) and instance["demands"][0] == 0
        assert instance["demands"][1:].min() >= 1 and instance["demands"][1:].max() <= 9 and instance["capacity"] == 50
    (bpp,) = get_task("bpp_aco").groups("search")
    assert len(bpp.instances) == 5 and bpp.instances[0]["capacity"] == 150
    assert np.array_equal(bpp.instances[0]["demands"], np.random.RandomState(5).randint(20, 101, size=(5, 500))[0])


@pytest.mark.parametrize(
    ("task_name", "sizes"), [("tsp_aco", [50, 100]), ("cvrp_aco", [50, 100]), ("bpp_aco", [500, 1000])]
)
def test_test_split_has_64_instances_per_published_size(task_name: str, sizes: list[int]) -> None:
    groups = get_task(task_name).groups("test")
    assert [g.label for g in groups] == [f"n{size}" for size in sizes]
    assert all(len(g.instances) == 64 for g in groups)


@pytest.mark.parametrize("task_name", ["tsp_aco", "cvrp_aco", "bpp_aco"])
def test_splits_share_no_instance(task_name: str) -> None:
    task = get_task(task_name)
    key = "coords" if task_name != "bpp_aco" else "demands"
    seen = [i[key].tobytes() for split in ("search", "val", "test") for g in task.groups(split) for i in g.instances]
    assert len(seen) == len(set(seen))


def test_bpp_reference_is_the_l1_bound() -> None:
    instance = {"demands": np.array([100, 100, 51]), "capacity": np.int64(150), **protocol_fields(0, 1)}
    assert get_task("bpp_aco").reference_objective(instance) == 2.0
    assert get_task("bpp_aco").score(instance, [0, 1, 2]) == 3.0


def test_cvrp_reference_bounds_a_feasible_solution_from_below() -> None:
    instance = small_cvrp()
    task = get_task("cvrp_aco")
    bound = task.reference_objective(instance)
    assert 0 < bound <= task.score(instance, task.construct(inverse_distance, instance))


@pytest.mark.parametrize("task_name", ["tsp_aco", "cvrp_aco", "bpp_aco"])
def test_shipped_references_match_the_instances(task_name: str) -> None:
    from tasks.references import group_references

    task = get_task(task_name)
    for split in ("search", "val", "test"):
        for group in task.groups(split):
            references = group_references(task, split, group)
            assert np.all(references > 0)


# --- published figure -----------------------------------------------------------------------------


PUBLISHED_PLAIN_ACO_TSP50 = 5.992
"""MCTS-AHD's plain-ACO TSP50 figure (64 test instances, 30 ants, 500 iterations)."""


@pytest.mark.slow
def test_plain_aco_lands_near_the_published_tsp50_objective() -> None:
    """Measured here: 6.131 with colony seeds 0..63 (+2.3%), 6.160 with seeds 1000..1063, 6.142 on
    the test set ReEvo's generator draws (after 64 x TSP20). The published code, mirrored line by
    line in torch, scores like this engine (TSP100, 8 instances: 9.44 vs 9.54; published 8.948),
    and no single setting closes the distance (estimated on 16 and 8 instances, it would take about
    1,400 iterations at TSP50 but over 2,000 at TSP100): the figure is reproduced within 3%, not within 2%."""
    from tasks.references import group_references

    task = get_task("tsp_aco")
    (group,) = [g for g in task.groups("test") if g.label == "n50"]
    objectives = [task.score(i, task.construct(inverse_distance, i)) for i in group.instances]
    assert math.isclose(np.mean(objectives), PUBLISHED_PLAIN_ACO_TSP50, rel_tol=0.03)
    assert np.mean(objectives) > group_references(task, "test", group).mean()
