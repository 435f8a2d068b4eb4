"""Which model of an ensemble answers next: an asymmetric UCB bandit on improvement per token or per cost.

An arm is one model; a pull is one child it wrote from parents. The pull's reward is the child's
improvement over its best parent, clipped below at 0, divided by what the answer spent (its completion
tokens, or its cost where the models are priced). The clipping is the asymmetry: a worse or broken
child earns 0 rather than a loss, so a model that now and then finds a large gain is not buried by its
many misses, and it is charged for them through the tokens they spent. Rewards are divided by the
largest seen so far, which puts them in [0, 1] whatever the task's objective scale, and an arm's score
is its mean scaled reward plus UCB1's bonus, `exploration * sqrt(2 ln N / n)`. An arm with no pull
goes first. There is no random draw: the shares are a pure function of the pulls (ties go to the arm
listed first), so a run that reads its pulls back from its store repeats its choices after a resume.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pull:
    """One child an arm wrote from parents."""

    arm: str
    improvement: float | None
    """The child's fitness minus its best parent's (higher is better); None: the child is invalid."""
    spent: float
    """The answer's completion tokens, or its cost where the models are priced."""


def gain(pull: Pull) -> float:
    """The child's improvement clipped below at 0 (an invalid child gains nothing)."""
    return 0.0 if pull.improvement is None else max(pull.improvement, 0.0)


def reward(pull: Pull) -> float:
    """The gain per token (or per unit of cost); 0 for an answer that spent nothing."""
    return gain(pull) / pull.spent if pull.spent > 0 else 0.0


def scores(arms: Sequence[str], pulls: Sequence[Pull], pending: dict[str, int], exploration: float) -> dict[str, float]:
    """Each arm's UCB score: infinite before its first pull, else its mean scaled reward plus the
    exploration bonus. `pending` counts pulls already allotted whose rewards are not known yet: they
    shrink their arm's bonus but not its mean, so one call's requests spread over the arms."""
    rewards = [reward(pull) for pull in pulls]
    scale = max(rewards, default=0.0) or 1.0
    totals = dict.fromkeys(arms, 0.0)
    counts = dict.fromkeys(arms, 0)
    for pull, value in zip(pulls, rewards, strict=True):
        if pull.arm in totals:
            totals[pull.arm] += value / scale
            counts[pull.arm] += 1
    everything = sum(counts.values()) + sum(pending.get(arm, 0) for arm in arms)
    result = {}
    for arm in arms:
        pulled = counts[arm] + pending.get(arm, 0)
        if pulled == 0:
            result[arm] = math.inf
            continue
        mean = totals[arm] / counts[arm] if counts[arm] else 0.0
        result[arm] = mean + exploration * math.sqrt(2 * math.log(everything) / pulled)
    return result


def shares(arms: Sequence[str], pulls: Sequence[Pull], requests: int, exploration: float) -> dict[str, int]:
    """How many of a call's `requests` each arm answers: each request goes to the best-scoring arm, the
    requests before it counted as its arm's pending pulls."""
    if not arms:
        raise ValueError("a bandit needs at least one arm")
    allotted = dict.fromkeys(arms, 0)
    for _ in range(requests):
        current = scores(arms, pulls, allotted, exploration)
        allotted[max(arms, key=current.__getitem__)] += 1
    return allotted
