"""Credit splitting for members that differ in both their text and their weights.

A member's reward mixes what it was shown (a prompt variant, a set of skills) with its ES direction.
The split reads the text's part off group means, and hands ES each member's reward minus that part,
so a good prompt cannot masquerade as a good direction.

* Any subset of N skills per member (the skill methods): a skill's effect is the mean reward of the
  members shown it minus the mean of those not shown it, and a member's residual removes the additive
  effects of its subset. With a single skill this is a variant split (two variants: shown, not shown):
  each member's reward less its variant's mean.
* Where mirrored ES pairs share their text (the heuristic methods by default), no split is needed for
  the weights: the engine centres each pair's rewards (`coevo.es.strategy.pair_residuals`), which removes
  whatever the pair shares exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence, Set


def group_means(groups: Sequence[Hashable], rewards: Sequence[float]) -> dict[Hashable, float]:
    """The mean reward of each group's members (member i is in `groups[i]`)."""
    by_group: dict[Hashable, list[float]] = defaultdict(list)
    for group, reward in zip(groups, rewards, strict=True):
        by_group[group].append(reward)
    return {group: sum(values) / len(values) for group, values in by_group.items()}


def effects_against_absence(shown: Sequence[Set[str]], rewards: Sequence[float]) -> dict[str, float]:
    """Per skill shown to some members but not all: mean reward shown minus mean reward not shown.
    A skill every member saw (or none did) has no contrast, so no estimate."""
    effects = {}
    for name in sorted(set().union(*shown)) if shown else ():
        means = group_means([name in subset for subset in shown], rewards)
        if len(means) == 2:
            effects[name] = means[True] - means[False]
    return effects


def additive_residuals(shown: Sequence[Set[str]], rewards: Sequence[float], effects: dict[str, float]) -> list[float]:
    """Each member's reward minus the mean and the additive effects of its skills (each centred on how
    often the skill was shown), the residual ES is told."""
    count = len(rewards)
    mean = sum(rewards) / count
    share = {name: sum(name in subset for subset in shown) / count for name in effects}
    return [
        reward - mean - sum(effect * ((name in subset) - share[name]) for name, effect in effects.items())
        for subset, reward in zip(shown, rewards, strict=True)
    ]
