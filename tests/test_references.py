"""Shipped references: they must belong to today's instances, and gaps must be computed right."""

from __future__ import annotations

import importlib.util
import multiprocessing
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

import tasks.references as references
from tasks import SPLITS, TASK_NAMES, InstanceGroup, get_task
from tasks.references import (
    GroupReference,
    MissingReferences,
    ReferenceMismatch,
    gap_pct,
    group_references,
    load_manifest,
    save_manifest,
)

SHIPPED = sorted(path.stem for path in references.DATA_DIR.glob("*.json") if path.stem in TASK_NAMES)


def test_every_constructive_task_ships_references():
    assert {"tsp_construct", "kp_construct", "asp_construct", "bpp_online"} <= set(SHIPPED)


@pytest.mark.parametrize("task_name", SHIPPED)
def test_shipped_references_match_the_generated_instances(task_name):
    task = get_task(task_name)
    manifest = load_manifest(task_name)
    assert set(manifest) == set(SPLITS)
    for split in SPLITS:
        groups = task.groups(split)
        assert set(manifest[split]) == {group.label for group in groups}
        for group in groups:
            values = group_references(task, split, group)  # raises on any hash or count drift
            assert values.shape == (len(group.instances),)
            assert np.all(np.isfinite(values))


def test_a_drifted_instance_set_is_rejected():
    task = get_task("kp_construct")
    group = task.groups("search")[0]
    drifted = [dict(instance) for instance in group.instances]
    drifted[3] = {**drifted[3], "weights": drifted[3]["weights"] + 1e-12}
    with pytest.raises(ReferenceMismatch, match="hash"):
        group_references(task, "search", InstanceGroup(group.label, drifted))


def test_an_unknown_group_has_no_references():
    task = get_task("kp_construct")
    group = task.groups("search")[0]
    with pytest.raises(MissingReferences):
        group_references(task, "search", InstanceGroup("n999", group.instances))


def test_gap_is_the_relative_excess_of_the_means():
    assert gap_pct([11.0, 9.0, 13.0], [10.0, 10.0, 10.0]) == pytest.approx(10.0)
    # maximisation tasks store negated objectives: 90 against an optimum of 100 is a 10% gap
    assert gap_pct([-90.0], [-100.0]) == pytest.approx(10.0)
    assert gap_pct([-100.0], [-100.0]) == 0.0


@pytest.mark.parametrize(("objectives", "refs"), [([1.0, 2.0], [1.0]), ([], []), ([1.0], [0.0])])
def test_gap_rejects_unusable_input(objectives, refs):
    with pytest.raises(ValueError):
        gap_pct(objectives, refs)


def test_manifest_round_trips_through_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(references, "DATA_DIR", tmp_path)
    task = get_task("asp_construct")
    manifest = {"search": {"n15_w10": GroupReference(sha256="ab" * 32, values=(-3003.0,))}}
    path = save_manifest(task, manifest)
    assert path == tmp_path / "asp_construct.json"
    assert load_manifest("asp_construct") == manifest
    load_manifest.cache_clear()


def _load_script(name: str, monkeypatch):
    """Import an experiments/ script by path (registered, so pool workers can unpickle its functions)."""
    path = Path(__file__).resolve().parent.parent / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def test_compute_references_reproduces_the_shipped_manifest(tmp_path, monkeypatch):
    compute_task = _load_script("compute_references", monkeypatch).compute_task
    shipped = load_manifest("asp_construct")
    monkeypatch.setattr(references, "DATA_DIR", tmp_path)
    load_manifest.cache_clear()
    with multiprocessing.get_context("fork").Pool(1) as pool, Progress(disable=True) as progress:
        path = compute_task(get_task("asp_construct"), list(SPLITS), pool, progress)
    assert Path(path).exists()
    assert load_manifest("asp_construct") == shipped
    load_manifest.cache_clear()
