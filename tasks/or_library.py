"""OR-Library's uniform bin-packing instances (binpack1-4), FunSearch's OR1-OR4 benchmark.

Falkenauer's classes u120, u250, u500 and u1000 hold 20 instances each of integer item sizes in
20..100 for bins of capacity 150. They come from one generator stream: instance k of the class
with n items is the slice ``items[k*n:(k+1)*n]`` of a single 20,000-item sequence, so
``tasks/data/bpp_or_library.json`` ships that sequence once, in arrival order (which matters
online), with the best-known bin counts the OR-Library files list for every instance. Online
bin packing evaluates them as extra test groups (``or1`` .. ``or4``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_PATH = Path(__file__).with_name("data") / "bpp_or_library.json"
INSTANCES_PER_CLASS = 20


@dataclass(frozen=True)
class ORLibraryClass:
    """One OR-Library class: its instances (item sequences) and their best-known bin counts."""

    label: str
    capacity: int
    instances: tuple[np.ndarray, ...]
    best_known: tuple[int, ...]


@functools.cache
def or_library_classes() -> tuple[ORLibraryClass, ...]:
    """The four classes, cut from the shipped item sequence (read once per process)."""
    raw = json.loads(DATA_PATH.read_text())
    items = np.array(raw["items"].split(), dtype=np.int64)
    classes = []
    for label, size in raw["items_per_instance"].items():
        if len(items) < INSTANCES_PER_CLASS * size or len(raw["best_known_bins"][label]) != INSTANCES_PER_CLASS:
            raise ValueError(f"{DATA_PATH.name} is truncated: class {label} needs {INSTANCES_PER_CLASS} x {size} items")
        instances = tuple(items[k * size : (k + 1) * size].copy() for k in range(INSTANCES_PER_CLASS))
        best_known = tuple(int(bins) for bins in raw["best_known_bins"][label])
        classes.append(ORLibraryClass(label, int(raw["capacity"]), instances, best_known))
    return tuple(classes)


@functools.cache
def _best_known_by_instance() -> dict[tuple[int, bytes], int]:
    return {
        (cls.capacity, items.tobytes()): bins
        for cls in or_library_classes()
        for items, bins in zip(cls.instances, cls.best_known)
    }


def best_known_bins(items: np.ndarray, capacity: int) -> int | None:
    """The best-known bin count of an OR-Library instance, None for any other item sequence.

    Looked up by content, so the instances handed to a candidate never carry their reference.
    """
    return _best_known_by_instance().get((int(capacity), np.asarray(items, dtype=np.int64).tobytes()))
