"""The four constructive tasks: faithful instances, strict checks, and published baseline figures."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tasks import InvalidSolution, get_task, instance_hash
from tasks.asp_construct import TRIPLES, candidate_rows, greedy_admissible_rows
from tasks.baselines import classical_files, evaluate_split, file_solver, seed_solver
from tasks.or_library import best_known_bins
from tasks.references import gap_pct, group_references

FIXTURES = Path(__file__).parent / "fixtures"
CONSTRUCTIVE = ("tsp_construct", "kp_construct", "asp_construct", "bpp_online")

EXPECTED_LAYOUT = {
    "tsp_construct": {
        "search": {"n50": 64},
        "val": {"n50": 64, "n100": 64, "n200": 64},
        "test": {"n50": 1000, "n100": 1000, "n200": 1000},
    },
    "kp_construct": {
        "search": {"n100": 64},
        "val": {"n50": 64, "n100": 64, "n200": 64},
        "test": {"n50": 1000, "n100": 1000, "n200": 1000},
    },
    "asp_construct": {
        "search": {"n15_w10": 1},
        "val": {"n12_w7": 1, "n15_w10": 1},
        "test": {"n12_w7": 1, "n15_w10": 1, "n21_w15": 1, "n24_w17": 1},
    },
    "bpp_online": {
        "search": {"1k_c100": 1, "1k_c500": 1, "5k_c100": 1, "5k_c500": 1},
        "val": {"1k_c100": 5, "1k_c500": 5, "5k_c100": 5, "5k_c500": 5},
        "test": {
            "1k_c100": 5, "5k_c100": 5, "10k_c100": 5, "1k_c500": 5, "5k_c500": 5, "10k_c500": 5,
            "or1": 20, "or2": 20, "or3": 20, "or4": 20,
        },
    },
}  # fmt: skip
OR_LIBRARY_SIZES = {"or1": 120, "or2": 250, "or3": 500, "or4": 1000}


def first_instance(task_name: str, split: str = "search") -> dict:
    return get_task(task_name).groups(split)[0].instances[0]


# --- instance sets -------------------------------------------------------------------------


@pytest.mark.parametrize("task_name", CONSTRUCTIVE)
def test_splits_have_the_published_groups_and_sizes(task_name):
    task = get_task(task_name)
    for split, expected in EXPECTED_LAYOUT[task_name].items():
        assert {group.label: len(group.instances) for group in task.groups(split)} == expected


def test_tsp_search_set_is_reevos_seed_1234_draw():
    published = np.random.RandomState(1234).rand(64, 50, 2)
    coords = np.stack([instance["coords"] for instance in get_task("tsp_construct").groups("search")[0].instances])
    np.testing.assert_array_equal(coords, published)


def test_kp_search_set_is_mcts_ahd_seed_3333_draw():
    published = np.random.RandomState(3333).rand(64, 100, 2)
    instances = get_task("kp_construct").groups("search")[0].instances
    np.testing.assert_array_equal(np.stack([i["weights"] for i in instances]), published[:, :, 0])
    np.testing.assert_array_equal(np.stack([i["values"] for i in instances]), published[:, :, 1])
    assert {i["capacity"] for i in instances} == {25.0}
    assert {i["capacity"] for i in get_task("kp_construct").groups("test")[0].instances} == {12.5}


def test_bpp_items_are_truncated_weibull_sizes_within_the_bin():
    items = np.concatenate([i["items"] for g in get_task("bpp_online").groups("val") for i in g.instances])
    assert items.dtype.kind == "i" and items.min() >= 1 and items.max() <= 100
    # Weibull(3) x 45 has mean 40.18; truncation to integers removes about 0.5 of it
    assert items.mean() == pytest.approx(39.7, abs=0.3)


def _or_library_groups() -> dict[str, list[dict]]:
    return {g.label: g.instances for g in get_task("bpp_online").groups("test") if g.label in OR_LIBRARY_SIZES}


def test_or_library_groups_are_falkenauers_uniform_instances():
    for label, instances in _or_library_groups().items():
        assert {len(i["items"]) for i in instances} == {OR_LIBRARY_SIZES[label]}
        assert {i["capacity"] for i in instances} == {150}
        items = np.concatenate([i["items"] for i in instances])
        assert items.min() >= 20 and items.max() <= 100


def test_or_library_best_known_counts_sit_on_the_l1_bound_except_the_known_hard_instances():
    """Checks the shipped item sums: every best-known count is ceil(sum/150), except the five
    instances whose optimum is famously one bin above it (u120_08, u120_19, u250_07/12/13)."""
    above_l1 = {}
    for label, instances in _or_library_groups().items():
        for position, instance in enumerate(instances):
            excess = best_known_bins(instance["items"], 150) - int(np.ceil(instance["items"].sum() / 150))
            if excess:
                above_l1[(label, position)] = excess
    assert above_l1 == {("or1", 8): 1, ("or1", 19): 1, ("or2", 7): 1, ("or2", 12): 1, ("or2", 13): 1}


def test_bpp_reference_is_the_best_known_count_on_or_library_and_l1_elsewhere():
    task = get_task("bpp_online")
    hard = _or_library_groups()["or1"][8]
    assert task.reference_objective(hard) == 51.0 == np.ceil(hard["items"].sum() / 150) + 1
    shifted = {**hard, "items": np.roll(hard["items"], 1)}  # same items, another arrival order
    assert task.reference_objective(shifted) == 50.0


def test_splits_share_no_instance():
    task = get_task("tsp_construct")
    hashes = {split: {instance_hash([i]) for g in task.groups(split) for i in g.instances} for split in ("search", "val")}
    assert not hashes["search"] & hashes["val"]


# --- seeds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task_name", CONSTRUCTIVE)
def test_seed_builds_a_valid_solution_no_better_than_the_reference(task_name):
    task = get_task(task_name)
    group = task.groups("search")[0]
    objective = task.score(group.instances[0], seed_solver(task)(group.instances[0]))
    reference = group_references(task, "search", group)[0]
    assert np.isfinite(objective)
    assert objective >= reference - 1e-9 if task.sense == "min" else objective <= reference + 1e-9


@pytest.mark.parametrize("task_name", CONSTRUCTIVE)
def test_seed_code_defines_the_signature_function(task_name):
    task = get_task(task_name)
    assert f"def {task.function_name}(" in task.seed_code()
    assert task.signature.startswith(f"def {task.function_name}(")


# --- the heuristic's decisions are checked step by step -------------------------------------


BAD_HEURISTICS = [
    ("tsp_construct", lambda cur, dest, unvisited, dist: cur, r"select_next_node returned 0, .*already visited"),
    ("tsp_construct", lambda cur, dest, unvisited, dist: 50, r"returned 50, .*outside 0\.\.49"),
    ("tsp_construct", lambda cur, dest, unvisited, dist: -1, r"returned -1, .*outside"),
    ("tsp_construct", lambda cur, dest, unvisited, dist: 3.0, r"returned 3\.0 of type float, expected an int"),
    ("tsp_construct", lambda cur, dest, unvisited, dist: float("nan"), r"returned nan of type float"),
    ("tsp_construct", lambda cur, dest, unvisited, dist: True, r"returned True of type bool"),
    ("tsp_construct", lambda cur, dest, unvisited, dist: None, r"returned None of type NoneType"),
    ("kp_construct", lambda cap, w, v: len(w), r"select_next_item returned 100, outside 0\.\.99"),
    ("kp_construct", lambda cap, w, v: -1, r"returned -1, outside"),
    ("kp_construct", lambda cap, w, v: int(np.argmax(w)), r"an item of weight 0\.\d+ that exceeds the remaining capacity"),
    ("kp_construct", lambda cap, w, v: np.float64(2), r"of type float64, expected an int"),
    ("bpp_online", lambda item, bins: 1.0, r"priority returned scores of shape \(\), expected \(\d+,\)"),
    ("bpp_online", lambda item, bins: bins[:-1], r"shape \(\d+,\), expected"),
    ("bpp_online", lambda item, bins: np.full(len(bins), np.nan), r"non-finite score \(nan\)"),
    ("bpp_online", lambda item, bins: ["a"] * len(bins), r"expected \d+ numeric scores"),
    ("asp_construct", lambda el, n, w: float("inf"), r"priority returned inf, expected a finite number"),
    ("asp_construct", lambda el, n, w: "high", r"returned 'high' of type str, expected a number"),
    ("asp_construct", lambda el, n, w: None, r"of type NoneType"),
]


@pytest.mark.parametrize(("task_name", "heuristic", "message"), BAD_HEURISTICS)
def test_bad_decisions_are_rejected_with_a_precise_reason(task_name, heuristic, message):
    task = get_task(task_name)
    with pytest.raises(InvalidSolution, match=message):
        task.construct(heuristic, first_instance(task_name))


def test_heuristics_cannot_corrupt_the_state_they_are_shown():
    task = get_task("tsp_construct")

    def vandal(current_node, destination_node, unvisited_nodes, distance_matrix):
        choice = min(unvisited_nodes)
        unvisited_nodes.clear()
        distance_matrix[:] = 0.0
        return choice

    instance = first_instance("tsp_construct")
    assert task.score(instance, task.construct(vandal, instance)) > 0


# --- solutions are re-validated from scratch ------------------------------------------------


def _kp_all_items(instance):
    return np.arange(len(instance["weights"]))


BAD_SOLUTIONS = [
    ("tsp_construct", lambda inst: np.r_[np.arange(49), 0], r"not a permutation"),
    ("tsp_construct", lambda inst: np.arange(49), r"must be 50 integer city indices"),
    ("tsp_construct", lambda inst: np.arange(50.0), r"integer city indices"),
    ("kp_construct", _kp_all_items, r"over the capacity"),
    ("kp_construct", lambda inst: np.array([1, 1]), r"same item twice"),
    ("kp_construct", lambda inst: np.array([100]), r"outside 0\.\.99"),
    ("bpp_online", lambda inst: np.zeros(len(inst["items"]), dtype=np.int64), r"bin 0 holds \d+, over the capacity 100"),
    ("bpp_online", lambda inst: np.arange(len(inst["items"]) - 1), r"one integer bin per item"),
    ("bpp_online", lambda inst: -np.ones(len(inst["items"]), dtype=np.int64), r"bins outside"),
    ("asp_construct", lambda inst: candidate_rows(15, 10)[:2], r"same non-zero pattern"),
    ("asp_construct", lambda inst: np.zeros((1, 5), dtype=np.int64), r"row 0 has 0 non-zero entries, expected 10"),
    ("asp_construct", lambda inst: np.zeros((1, 4), dtype=np.int64), r"shape \(rows, 5\)"),
]


@pytest.mark.parametrize(("task_name", "make_solution", "message"), BAD_SOLUTIONS)
def test_score_rejects_infeasible_solutions(task_name, make_solution, message):
    instance = first_instance(task_name)
    with pytest.raises(InvalidSolution, match=message):
        get_task(task_name).score(instance, make_solution(instance))


def _expand(rows: np.ndarray) -> np.ndarray:
    """All vectors a pre-admissible set stands for: every cyclic rotation of every block."""
    vectors = set()
    for row in rows:
        block_choices = [{tuple(np.roll(TRIPLES[code], shift)) for shift in range(3)} for code in row]
        vectors.update(sum(blocks, ()) for blocks in itertools.product(*block_choices))
    return np.array(sorted(vectors))


def _is_admissible(vectors: np.ndarray, w: int) -> bool:
    """The definition itself, by brute force over all triples."""
    if not np.all(np.count_nonzero(vectors, axis=1) == w):
        return False
    separating = {(0, 1, 2), (0, 0, 1), (0, 0, 2)}
    for u, v, x in itertools.combinations(vectors, 3):
        if not any(tuple(sorted(values)) in separating for values in zip(u, v, x)):
            return False
    return True


@pytest.mark.parametrize(("n", "w"), [(6, 4), (9, 5), (9, 6)])
def test_asp_sets_accepted_by_score_are_admissible_by_definition(n, w):
    task = get_task("asp_construct")
    rows = candidate_rows(n, w)
    built = greedy_admissible_rows(rows, np.random.RandomState(n + w).rand(len(rows)))
    assert task.score({"n": n, "w": w}, built) == len(_expand(built))
    assert _is_admissible(_expand(built), w)
    for extra in rows:  # every one-row extension: whatever score accepts must truly be admissible
        extended = np.vstack([built, extra])
        try:
            task.score({"n": n, "w": w}, extended)
        except InvalidSolution:
            continue
        assert _is_admissible(_expand(extended), w)


def test_asp_score_accepts_funsearchs_record_set_at_its_published_size():
    """FunSearch's pre-admissible set for A(15, 10) (their repository, CC-BY) must count 3003."""
    lines = (FIXTURES / "funsearch_pre_admissible_n15_w10_size3003.txt").read_text().splitlines()
    rows = np.array([json.loads(line) for line in lines])
    assert get_task("asp_construct").score({"n": 15, "w": 10}, rows) == 3003


# --- published baseline figures ------------------------------------------------------------


def _gaps(task_name: str, solver_name: str, split: str, labels=None) -> dict[str, float]:
    task = get_task(task_name)
    solve = seed_solver(task) if solver_name == "seed" else file_solver(task, classical_files(task)[solver_name])
    return {result.label: result.gap_pct for result in evaluate_split(task, split, solve, labels=labels)}


def test_kp_greedy_reproduces_the_published_gaps():
    gaps = _gaps("kp_construct", "greedy", "test")
    assert gaps["n50"] == pytest.approx(0.26, abs=0.05)
    assert gaps["n100"] == pytest.approx(0.12, abs=0.05)
    assert gaps["n200"] == pytest.approx(0.09, abs=0.05)


def test_tsp50_nearest_neighbour_reproduces_the_published_gap():
    assert _gaps("tsp_construct", "nearest_neighbour", "test", labels={"n50"})["n50"] == pytest.approx(22.62, abs=1.0)


@pytest.mark.slow
def test_tsp_nearest_neighbour_and_farthest_insertion_on_all_sizes():
    nearest = _gaps("tsp_construct", "nearest_neighbour", "test")
    assert [nearest[label] for label in ("n100", "n200")] == pytest.approx([24.94, 26.29], abs=1.0)
    farthest = _gaps("tsp_construct", "farthest_insertion", "test")
    assert [farthest[label] for label in ("n50", "n100", "n200")] == pytest.approx([5.53, 7.49, 9.03], abs=1.0)


def test_bpp_best_fit_reproduces_funsearch_weibull_5k():
    assert _gaps("bpp_online", "best_fit", "test", labels={"5k_c100"})["5k_c100"] == pytest.approx(3.98, abs=0.3)


@pytest.mark.parametrize(
    ("solver_name", "published"),
    [("best_fit", [5.81, 6.06, 5.37, 4.94]), ("first_fit", [6.42, 6.45, 5.74, 5.23])],
)
def test_bpp_baselines_reproduce_funsearch_or1_to_or4(solver_name, published):
    """FunSearch reports OR1-OR4 as excess bins over the L1 bound (its Table 1)."""
    task = get_task("bpp_online")
    solve = file_solver(task, classical_files(task)[solver_name])
    excess = []
    for instances in _or_library_groups().values():
        bins = [task.score(instance, solve(instance)) for instance in instances]
        excess.append(gap_pct(bins, [np.ceil(i["items"].sum() / i["capacity"]) for i in instances]))
    assert excess == pytest.approx(published, abs=0.05)


def test_bpp_seed_reproduces_funsearch_weibull_5k():
    assert _gaps("bpp_online", "seed", "test", labels={"5k_c100"})["5k_c100"] == pytest.approx(0.68, abs=0.3)
