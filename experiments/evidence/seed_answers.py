"""The model's answers to the mutation prompts (m1, m2) on a task's seed heuristic, scored on search:
what `weights_effect.py` (two sets of weights) and `answer_format.py` (two answer formats) compare, each
side asked the same prompts with the same sampling streams."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from coevo.llm.base import SamplingParams
from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
from coevo.operators.records import Parent, Proposal
from coevo.run.config import RunConfig

if TYPE_CHECKING:
    from coevo.evaluate.evaluator import Evaluator
    from tasks.base import Task

OPERATORS = ("m1", "m2")
SAMPLING_SEED = 20261206
"""Fixed, so a rerun asks the same streams: the figures depend on what is compared alone."""


def sample_count(text: str) -> int:
    """`--samples`: answers per side, at least two (a rate of one answer says nothing)."""
    count = int(text)
    if count < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, got {count}")
    return count


def seed_requests(task: Task, evaluator: Evaluator, samples: int) -> tuple[list[ProposalRequest], float]:
    """`samples` requests, m1 and m2 in turn, on the task's seed heuristic, and the seed's search gap."""
    seed = evaluator.evaluate(task.seed_code())
    parent = Parent("seed", "the task's seed heuristic", task.seed_code(), seed.objective)
    return [ProposalRequest(OPERATORS[i % len(OPERATORS)], (parent,)) for i in range(samples)], seed.gap_pct


def config_sampling(config: RunConfig) -> SamplingParams:
    """The run config's sampling settings with the fixed seed."""
    return SamplingParams(
        max_new_tokens=config.llm.max_new_tokens,
        temperature=config.llm.temperature,
        top_p=config.llm.top_p,
        seed=SAMPLING_SEED,
    )


def answered(operators: EoHOperators, requests: list[ProposalRequest], evaluator: Evaluator) -> dict[str, Any]:
    """One side's answers to `requests`: per sample valid or not and its search gap, and the summary."""
    answers = operators.propose_many(requests)
    codes = [a.code for a in answers if isinstance(a, Proposal)]
    verdicts = iter(evaluator.evaluate_many(codes))
    samples = []
    for answer in answers:
        verdict = next(verdicts) if isinstance(answer, Proposal) else None
        valid = verdict is not None and verdict.valid
        samples.append({"valid": valid, "gap_pct": verdict.gap_pct if valid else None})
    gaps = [s["gap_pct"] for s in samples if s["valid"] and s["gap_pct"] is not None]
    return {
        "valid_rate": sum(s["valid"] for s in samples) / len(samples),
        "mean_gap_pct": sum(gaps) / len(gaps) if gaps else None,
        "samples": samples,
    }
