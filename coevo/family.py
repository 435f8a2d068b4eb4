"""Workload families: what a run's members are, the one place a workload's kind makes a difference.

A family pairs a workload protocol (what its workloads must offer, checked when a workload plugin
loads) with a context protocol (what its methods may use). A workload class names its family; a method
names the families it runs on and is handed the context of the run's family, so no method asks which
workload it has and a new workload of a known family needs no change anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from coevo.context import EpisodeContext, HeuristicContext
from coevo.workload import EpisodeWorkload, HeuristicWorkload


@dataclass(frozen=True)
class Family:
    name: str
    members: str
    """What the members are, in words (docs, errors)."""
    workload: type
    """The protocol every workload of the family satisfies."""
    context: type
    """The protocol of the context the family's methods receive."""
    writes_code: bool
    """Members are code the LLM writes for a task from proposal requests, kept in a population: the run
    needs a task, and the code-side features (novelty check, model ensembles) apply."""

    def missing(self, workload_class: type) -> list[str]:
        """The members of the family's workload protocol that `workload_class` lacks (none: it fits); an
        attribute set in `__init__` counts where the class annotates it."""
        declared = set(dir(workload_class))
        for klass in workload_class.__mro__:
            declared |= set(getattr(klass, "__annotations__", {}))
        return sorted(protocol_members(self.workload) - declared)


def protocol_members(protocol: type) -> frozenset[str]:
    """The public attributes and methods a protocol class declares, its bases' included."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        names |= set(getattr(klass, "__annotations__", {}))
        names |= {name for name in vars(klass) if not name.startswith("_")}
    return frozenset(names)


HEURISTICS = Family("heuristics", "heuristics for the task", HeuristicWorkload, HeuristicContext, writes_code=True)
EPISODES = Family("episodes", "episodes played in an environment", EpisodeWorkload, EpisodeContext, writes_code=False)
