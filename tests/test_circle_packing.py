"""Circle packing: the strict verifier, the trusted driver's refusals, the seed, and `tasks eval`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from cli_capture import run_cli
from coevo.evaluate import Evaluator
from tasks import InvalidSolution, get_task
from tasks.circle_packing import RECORDS, CirclePacking26, CirclePacking32
from tasks.references import gap_pct, group_references

SEED = Path(__file__).resolve().parent.parent / "heuristics" / "seed" / "circle_packing.py"
QUARTERS = np.array([[0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]])
"""Four circles of radius 1/4 fill the square's quarters, each touching its neighbours and two sides:
every value is a dyadic rational, so the packing is exactly valid with no slack to spare."""


def score(centres, radii) -> float:
    return CirclePacking26().score({"n": len(radii)}, (np.asarray(centres), np.asarray(radii)))


def test_an_exactly_touching_packing_is_accepted_with_its_exact_sum():
    assert score(QUARTERS, [0.25] * 4) == 1.0


def test_zero_slack_one_unit_in_the_last_place_too_large_is_refused():
    grown = np.nextafter(0.25, 1.0)
    with pytest.raises(InvalidSolution, match="circle 0 .* leaves the unit square"):
        score(QUARTERS, [grown, 0.25, 0.25, 0.25])
    centres = QUARTERS.copy()
    centres[0, 0] = np.nextafter(0.25, 1.0)  # inside the square, one ulp closer to circle 1
    with pytest.raises(InvalidSolution, match="circles 0 and 1 overlap"):
        score(centres, [0.25] * 4)


def test_decimal_centres_that_overlap_in_exact_arithmetic_are_refused():
    """0.3 - 0.1 is a hair under 0.2 as the floats stand, so radii of 0.1 touch only in decimal arithmetic."""
    with pytest.raises(InvalidSolution, match="circles 0 and 1 overlap"):
        score([[0.1, 0.5], [0.3, 0.5]], [0.1, 0.1])


@pytest.mark.parametrize(
    ("centres", "radii", "reason"),
    [
        ([[0.5, 0.5], [0.6, 0.5]], [0.1, 0.1], "circles 0 and 1 overlap"),
        ([[0.05, 0.5], [0.5, 0.5]], [0.1, 0.1], "circle 0 .* leaves the unit square"),
        ([[0.5, 0.95], [0.2, 0.2]], [0.1, 0.1], "circle 0 .* leaves the unit square"),
        ([[0.2, 0.2], [0.8, 0.8]], [0.1, -0.1], r"circle 1 has a negative radius \(-0.1\)"),
        ([[0.2, 0.2], [0.8, 0.8]], [0.1, math.nan], r"the radii hold a non-finite value \(nan\)"),
        ([[0.2, math.inf], [0.8, 0.8]], [0.1, 0.1], r"the centres hold a non-finite value \(inf\)"),
        ([[0.2, 0.2, 0.0], [0.8, 0.8, 0.0]], [0.1, 0.1], r"the centres have shape \(2, 3\), expected \(2, 2\)"),
        ([[0.2, 0.2], [0.8, 0.8]], [0.1], r"the radii have shape \(1,\), expected \(2,\)"),
        ([[0.2, 0.2], [0.8, 0.8]], ["a", "b"], "the radii are not numbers"),
    ],
)
def test_the_verifier_refuses_with_a_reason(centres, radii, reason):
    with pytest.raises(InvalidSolution, match=reason):
        CirclePacking26().score({"n": 2}, (np.asarray(centres, dtype=object), np.asarray(radii, dtype=object)))


def test_an_answer_that_is_not_a_pair_is_refused():
    with pytest.raises(InvalidSolution, match="must be a pair"):
        CirclePacking26().score({"n": 4}, QUARTERS)


@pytest.mark.parametrize("task", [CirclePacking26(), CirclePacking32()], ids=lambda task: task.name)
def test_the_seed_is_a_valid_grid_whose_gap_is_to_the_record(task):
    namespace: dict = {}
    exec(task.seed_code(), namespace)
    (group,) = task.groups("test")
    solution = task.construct(namespace["pack_circles"], group.instances[0])
    side = math.ceil(math.sqrt(task.n))
    objective = task.score(group.instances[0], solution)
    assert objective == pytest.approx(task.n * (0.5 / side - 1e-12), abs=1e-12)
    references = group_references(task, "test", group)
    assert references.tolist() == [RECORDS[task.n]]
    assert gap_pct([objective], references, task.sense) == pytest.approx(100 * (1 - objective / RECORDS[task.n]))


def test_every_split_is_the_one_instance_of_its_size():
    for task in (CirclePacking26(), CirclePacking32()):
        for split in ("search", "val", "test"):
            assert [(group.label, group.instances) for group in task.groups(split)] == [(f"n{task.n}", [{"n": task.n}])]


def _evaluated(code: str):
    with Evaluator(CirclePacking26(), "search") as evaluator:
        return evaluator.evaluate(code)


def test_the_sandboxed_constructor_is_refused_when_it_answers_nan_or_overlaps():
    nan = "import numpy as np\ndef pack_circles(n):\n    return np.full((n, 2), 0.5), np.full(n, np.nan)\n"
    overlapping = "import numpy as np\ndef pack_circles(n):\n    return np.full((n, 2), 0.5), np.full(n, 0.1)\n"
    wrong_shape = "import numpy as np\ndef pack_circles(n):\n    return np.zeros((n, 3)), np.zeros(n)\n"
    answers = {"nan": nan, "overlap": overlapping, "shape": wrong_shape}
    verdicts = {name: _evaluated(code) for name, code in answers.items()}
    assert not any(verdict.valid for verdict in verdicts.values())
    assert "non-finite value (nan)" in verdicts["nan"].reason
    assert "circles 0 and 1 overlap" in verdicts["overlap"].reason
    assert "shape (26, 3), expected (26, 2)" in verdicts["shape"].reason


def test_tasks_eval_scores_the_seed_with_its_gap_to_the_record(capsys):
    code, out, _ = run_cli(capsys, "tasks", "eval", "circle_packing_26", str(SEED), "--split", "test", "--json")
    result = json.loads(out)
    assert code == 0 and result["valid"] is True
    assert result["objective"] == pytest.approx(26 * (1 / 12 - 1e-12), abs=1e-12)
    assert result["gap_pct"] == pytest.approx(100 * (1 - result["objective"] / RECORDS[26]))
    assert get_task("circle_packing_32").n == 32
