"""Compute every task's reference values once and ship them in ``tasks/data/<task>.json``.

    python experiments/compute_references.py                 # all registered tasks, all splits
    python experiments/compute_references.py tsp_construct --splits search val

Each task supplies ``Task.reference_objective(instance)``; this script only fans the instances out
over worker processes (nice'd: the machine is shared), shows progress, and writes the manifest.
Groups whose instance hash already matches the shipped manifest are kept, not recomputed.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import sys
from multiprocessing.pool import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tasks import SPLITS, TASK_NAMES, Task, get_task, instance_hash
from tasks.references import GroupReference, Manifest, MissingReferences, load_manifest, manifest_path, save_manifest

NICENESS = 10


@functools.cache
def _task(name: str) -> Task:
    return get_task(name)


def _reference(job: tuple[str, int, dict]) -> tuple[int, float]:
    task_name, position, instance = job
    return position, _task(task_name).reference_objective(instance)


def _shipped(task_name: str) -> Manifest:
    try:
        return load_manifest(task_name)
    except MissingReferences:
        return {}


def compute_task(task: Task, splits: list[str], pool: Pool, progress: Progress) -> Path:
    """Fill in the task's manifest for the given splits, recomputing only groups that changed.

    The manifest is saved after every group, so an interrupted run keeps the work it finished.
    """
    manifest = _shipped(task.name)
    for split in splits:
        groups = task.groups(split)
        entries = manifest.setdefault(split, {})
        for stale in set(entries) - {group.label for group in groups}:
            del entries[stale]
        for group in groups:
            digest = instance_hash(group.instances)
            previous = entries.get(group.label)
            if previous is not None and previous.sha256 == digest and len(previous.values) == len(group.instances):
                continue
            bar = progress.add_task(f"{task.name} {split}/{group.label}", total=len(group.instances))
            values = [0.0] * len(group.instances)
            jobs = [(task.name, position, instance) for position, instance in enumerate(group.instances)]
            for position, value in pool.imap_unordered(_reference, jobs, chunksize=4):
                values[position] = value
                progress.advance(bar)
            entries[group.label] = GroupReference(sha256=digest, values=tuple(values))
            save_manifest(task, manifest)
    save_manifest(task, manifest)
    return manifest_path(task.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", default=list(TASK_NAMES), help="task names (default: all registered)")
    parser.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.tasks) - set(TASK_NAMES))
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASK_NAMES)}")

    os.nice(NICENESS)  # the machine is shared; pool workers inherit the lower priority
    columns = (
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()
    )
    with multiprocessing.Pool(args.workers) as pool, Progress(*columns) as progress:
        for name in args.tasks:
            path = compute_task(get_task(name), args.splits, pool, progress)
            progress.console.print(f"{name}: wrote {path}")


if __name__ == "__main__":
    main()
