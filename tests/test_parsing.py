"""The parser against recorded messy LLM answers (tests/fixtures/llm_outputs, expected.json)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coevo.operators.parsing import FunctionSpec, ParsedCode, ParseFailure, parse_heuristic

FIXTURES = Path(__file__).parent / "fixtures" / "llm_outputs"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())

SPECS = {
    "tsp": FunctionSpec.from_signature(
        "def select_next_node(current_node: int, destination_node: int, unvisited_nodes: set, "
        "distance_matrix: np.ndarray) -> int"
    ),
    "kp": FunctionSpec.from_signature(
        "def select_next_item(remaining_capacity: float, weights: np.ndarray, values: np.ndarray) -> int"
    ),
    "bpp_online": FunctionSpec.from_signature("priority(item, bins_remain_cap) -> scores for each bin"),
}


def _check_tsp(function: Callable[..., Any]) -> None:
    coords = np.random.default_rng(0).random((7, 2))
    distances = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    unvisited = {2, 3, 5, 6}
    assert int(function(1, 0, unvisited, distances)) in unvisited


def _check_kp(function: Callable[..., Any]) -> None:
    weights, values = np.array([0.9, 0.2, 0.4]), np.array([0.5, 0.1, 0.6])
    assert int(function(0.5, weights, values)) == 2


def _check_bpp(function: Callable[..., Any]) -> None:
    scores = np.asarray(function(30, np.array([100, 35, 20, 60])))
    assert scores.shape == (4,) and int(np.argmax(scores)) == 1


RUNS_CORRECTLY = {"tsp": _check_tsp, "kp": _check_kp, "bpp_online": _check_bpp}


def test_fixture_set_is_complete() -> None:
    on_disk = {path.name for path in FIXTURES.glob("*.txt")}
    assert on_disk == set(EXPECTED)
    assert len(on_disk) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_output(name: str) -> None:
    expected = EXPECTED[name]
    text = (FIXTURES / name).read_bytes().decode()
    spec = SPECS[expected["task"]]
    result = parse_heuristic(text, spec, truncated=expected.get("truncated", False))
    if not expected["accept"]:
        assert isinstance(result, ParseFailure), f"accepted:\n{getattr(result, 'code', '')}"
        assert expected["reason_has"] in result.reason
        assert "\n" not in result.reason
        return
    assert isinstance(result, ParsedCode), result
    assert result.thought == expected["thought"]
    for piece in expected.get("code_has", []):
        assert piece in result.code
    for piece in expected.get("code_lacks", []):
        assert piece not in result.code
    for piece in expected.get("repairs_has", []):
        assert any(piece in repair for repair in result.repairs), result.repairs
    namespace: dict[str, Any] = {}
    exec(compile(result.code, name, "exec"), namespace)
    if expected.get("runs", True):  # recorded model outputs may parse yet be wrong: the evaluator's job
        RUNS_CORRECTLY[expected["task"]](namespace[spec.name])


def test_signature_reads_plain_and_def_forms() -> None:
    spec = SPECS["tsp"]
    assert spec.name == "select_next_node"
    assert spec.params == ("current_node", "destination_node", "unvisited_nodes", "distance_matrix")
    assert spec.header.startswith("def select_next_node(")
    assert SPECS["bpp_online"].params == ("item", "bins_remain_cap")


def test_unreadable_signature_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="cannot read function signature"):
        FunctionSpec.from_signature("select next node, please")


def test_truncation_flag_only_matters_for_an_open_fence() -> None:
    closed = (FIXTURES / "02_plain_fence_no_language.txt").read_text()
    assert isinstance(parse_heuristic(closed, SPECS["tsp"], truncated=True), ParsedCode)
    cut = (FIXTURES / "12_truncated_at_token_limit.txt").read_text()
    untruncated = parse_heuristic(cut, SPECS["tsp"], truncated=False)
    assert isinstance(untruncated, ParseFailure) and "never returns" in untruncated.reason


def test_untouched_code_keeps_its_comments() -> None:
    answer = (
        "{Nearest node.}\n```python\ndef select_next_node(a, b, c, d):\n"
        "    # closest first\n    return min(c, key=lambda n: d[a][n])\n```"
    )
    result = parse_heuristic(answer, SPECS["tsp"])
    assert isinstance(result, ParsedCode)
    assert "# closest first" in result.code
