"""Shipped reference values and instance manifests (``tasks/data/<task>.json``).

Reference solvers (LKH, OR-Tools, lower bounds) are slow or need native packages, so they are
run once by ``experiments/compute_references.py`` and their values shipped next to the SHA-256
of the instances they were computed on. Loading a group's references re-hashes its instances,
so a generator that drifts is caught instead of silently compared with stale values.

File layout::

    {"task": "tsp_construct", "reference_name": "LKH-3 (elkai)",
     "splits": {"test": {"n50": {"sha256": "...", "n_instances": 1000, "reference": [5.69, ...]}}}}

Reference values are in the task's natural sign, as its objective is.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tasks.base import InstanceGroup, SplitName, Task, instance_hash

DATA_DIR = Path(__file__).with_name("data")


class ReferenceMismatch(Exception):
    """The shipped references do not belong to the instances at hand (the generator drifted)."""


class MissingReferences(Exception):
    """No references are shipped for this task or group (yet)."""


@dataclass(frozen=True)
class GroupReference:
    """The manifest entry of one instance group: its hash and one reference per instance."""

    sha256: str
    values: tuple[float, ...]


Manifest = dict[str, dict[str, GroupReference]]
"""split -> group label -> reference entry."""


def manifest_path(task_name: str) -> Path:
    return DATA_DIR / f"{task_name}.json"


@functools.cache
def load_manifest(task_name: str) -> Manifest:
    """The shipped manifest of a task (cached per process); raises MissingReferences if absent."""
    path = manifest_path(task_name)
    if not path.exists():
        raise MissingReferences(f"no shipped references for {task_name}: run experiments/compute_references.py")
    raw = json.loads(path.read_text())
    return {
        split: {
            label: GroupReference(sha256=entry["sha256"], values=tuple(entry["reference"]))
            for label, entry in groups.items()
        }
        for split, groups in raw["splits"].items()
    }


def save_manifest(task: Task, manifest: Manifest) -> Path:
    """Write a task's manifest atomically (a crash never leaves half a file behind)."""
    payload = {
        "task": task.name,
        "reference_name": task.reference_name,
        "splits": {
            split: {
                label: {"sha256": ref.sha256, "n_instances": len(ref.values), "reference": list(ref.values)}
                for label, ref in groups.items()
            }
            for split, groups in manifest.items()
        },
    }
    path = manifest_path(task.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(payload, indent=1) + "\n")
    temporary.replace(path)
    load_manifest.cache_clear()
    return path


def group_references(task: Task, split: SplitName, group: InstanceGroup) -> np.ndarray:
    """The reference of every instance in the group: the task's own (``Task.references``), else the
    shipped ones after checking the instance hash."""
    own = task.references(split, group)
    if own is not None:
        values = np.asarray(own, dtype=np.float64)
        if values.shape != (len(group.instances),):
            raise ReferenceMismatch(f"{task.name} {split}/{group.label}: {values.size} references for {len(group.instances)} instances")
        return values
    entry = load_manifest(task.name).get(split, {}).get(group.label)
    if entry is None:
        raise MissingReferences(f"no shipped references for {task.name} {split}/{group.label}")
    actual = instance_hash(group.instances)
    if actual != entry.sha256:
        raise ReferenceMismatch(
            f"{task.name} {split}/{group.label}: instances hash to {actual[:12]}, "
            f"references were computed for {entry.sha256[:12]}"
        )
    if len(entry.values) != len(group.instances):
        raise ReferenceMismatch(
            f"{task.name} {split}/{group.label}: {len(entry.values)} references for {len(group.instances)} instances"
        )
    return np.asarray(entry.values, dtype=np.float64)


def gap_pct(objectives: Sequence[float], references: Sequence[float], sense: str = "min") -> float:
    """How far the mean objective falls short of the mean reference, in percent of the reference:
    the excess for a minimised objective, the shortfall for a maximised one (positive means worse).

    Ratio of means, as the published AHD tables compute it (mean tour length vs mean LKH length,
    mean bins vs mean L1 bound, mean value vs the optimum's).
    """
    objectives = np.asarray(objectives, dtype=np.float64)
    references = np.asarray(references, dtype=np.float64)
    if objectives.shape != references.shape or objectives.size == 0:
        raise ValueError(f"need as many objectives as references, got {objectives.shape} and {references.shape}")
    reference_mean = references.mean()
    if reference_mean == 0:
        raise ValueError("the mean reference is 0: a relative gap is undefined")
    worse_by = objectives.mean() - reference_mean if sense == "min" else reference_mean - objectives.mean()
    return float(100.0 * worse_by / abs(reference_mean))
