"""The heuristic-design task suite. ``get_task(name)`` is the one entry point."""

from __future__ import annotations

import importlib

from tasks.base import SPLITS, InstanceGroup, InvalidSolution, Task, instance_hash

_REGISTRY: dict[str, str] = {
    "tsp_construct": "tasks.tsp_construct:TSPConstruct",
    "kp_construct": "tasks.kp_construct:KPConstruct",
    "asp_construct": "tasks.asp_construct:ASPConstruct",
    "tsp_aco": "tasks.tsp_aco:TSPACO",
    "cvrp_aco": "tasks.cvrp_aco:CVRPACO",
    "bpp_aco": "tasks.bpp_aco:BPPACO",
    "bpp_online": "tasks.bpp_online:BPPOnline",
}

TASK_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def get_task(name: str) -> Task:
    """Instantiate a task by name; raises KeyError with the known names on a typo."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(TASK_NAMES)}")
    module_name, class_name = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


__all__ = ["SPLITS", "TASK_NAMES", "InstanceGroup", "InvalidSolution", "Task", "get_task", "instance_hash"]
