"""The whole LLM side on the real embedded model: SmolLM2 writes a heuristic the sandbox accepts.

Issue 4: within 8 attempts, the real SmolLM2-135M produces a parsable ``select_next_node`` that the
tsp_construct evaluator scores as valid. The attempts go out as one batch through the operators, the
way the runner uses them. The parent is the short nearest-neighbour heuristic: at 135M parameters the
model cannot yet rework the longer seed (it breaks its numpy indexing), so this checks the pipeline, not
the model's inventiveness.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.evaluate import Evaluator
from coevo.llm.base import SamplingParams
from coevo.operators import BudgetLedger, EoHOperators, Parent, Proposal
from tasks import get_task

pytestmark = pytest.mark.slow

ATTEMPTS = 8
NEAREST_NEIGHBOUR = Path(__file__).resolve().parent.parent / "heuristics/classical/tsp_construct_nearest_neighbour.py"


def test_smollm2_writes_a_valid_tsp_heuristic_within_eight_attempts():
    from coevo.llm.hf import HFBackend

    task = get_task("tsp_construct")
    ledger = BudgetLedger()
    operators = EoHOperators(
        llm=HFBackend.load("smollm2-135m"),
        task=task,
        ledger=ledger,
        sampling=SamplingParams(max_new_tokens=256, temperature=0.3, seed=7),
    )
    nearest = Parent(key="nn", thought="Go to the nearest unvisited city.", code=NEAREST_NEIGHBOUR.read_text())
    answers = operators.propose("m2", [[nearest]] * ATTEMPTS)

    proposals = [answer for answer in answers if isinstance(answer, Proposal)]
    assert proposals, f"no answer parsed: {[getattr(a, 'reason', '') for a in answers]}"
    with Evaluator(task, "search", limit=4) as evaluator:
        results = evaluator.evaluate_many([proposal.code for proposal in proposals])
    assert any(result.valid for result in results), [result.reason for result in results]
    usage = ledger.usage(operator="m2")
    assert usage.requests == ATTEMPTS and usage.completion_tokens > 0
