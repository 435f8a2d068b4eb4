"""Circle packing in the unit square: n disjoint circles with the largest sum of radii.

The candidate's function is a constructor: ``pack_circles(n)`` returns the n centres and radii.
It runs in the sandbox; the trusted driver checks what crossed back (two finite float arrays of
the right shapes) and ``score`` verifies the packing strictly before it sums the radii.

The verifier has no tolerance at all: it compares the returned float64 values as exact rational
numbers, so a circle must satisfy ``r <= x``, ``x + r <= 1`` (and the same for y) exactly, and two
circles ``(dx**2 + dy**2) >= (r_i + r_j)**2`` exactly. Touching is allowed, overlap by one unit in
the last place is not; a radius may be 0 but not negative. Records in the sixth decimal depend on
such a tolerance (verifiers with about 1e-7 of slack accept packings that overlap), so gaps here
are to the published records under the strictest reading. The sum is ``math.fsum`` of the radii
(the correctly rounded sum of the values returned).

There is one instance per size and nothing to generalise to, so every split holds the same one:
selection, the answer's choice and the report all see the problem the run works on. References are
the sums of radii of AlphaEvolve's published constructions (google-deepmind/alphaevolve_results).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from tasks.base import SEED_DIR, Heuristic, Instance, InstanceGroup, InvalidSolution, SplitName, Task

RECORDS: dict[int, float] = {26: 2.6358627564, 32: 2.9379445262}
"""Sum of radii of AlphaEvolve's published construction for each n."""

Packing = tuple[np.ndarray, np.ndarray]
"""Centres, shape (n, 2), and radii, shape (n,), as float64 arrays."""


def packing_arrays(value: Any, n: int, who: str) -> Packing:
    """`value` as (centres, radii) float64 arrays of shapes (n, 2) and (n,) with finite entries, or
    InvalidSolution saying what is wrong; `who` names the source in the message."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidSolution(f"{who} must be a pair (centres, radii), got {type(value).__name__}")
    arrays = []
    for name, part, shape in (("centres", value[0], (n, 2)), ("radii", value[1], (n,))):
        try:
            array = np.asarray(part, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise InvalidSolution(f"{who}: the {name} are not numbers") from None
        if array.shape != shape:
            raise InvalidSolution(f"{who}: the {name} have shape {array.shape}, expected {shape}")
        if not np.all(np.isfinite(array)):
            raise InvalidSolution(f"{who}: the {name} hold a non-finite value ({float(array[~np.isfinite(array)][0])})")
        arrays.append(array)
    return arrays[0], arrays[1]


def packing_violation(centres: np.ndarray, radii: np.ndarray) -> str | None:
    """Why the circles are not a packing in the unit square, or None; exact arithmetic, no slack."""
    negative = np.flatnonzero(radii < 0)
    if negative.size:
        return f"circle {negative[0]} has a negative radius ({float(radii[negative[0]])!r})"
    x = [Fraction(float(value)) for value in centres[:, 0]]
    y = [Fraction(float(value)) for value in centres[:, 1]]
    r = [Fraction(float(value)) for value in radii]
    for i in range(len(r)):
        if not (r[i] <= x[i] <= 1 - r[i] and r[i] <= y[i] <= 1 - r[i]):
            return f"circle {i} (centre {centres[i].tolist()}, radius {float(radii[i])!r}) leaves the unit square"
    for i in range(len(r)):
        for j in range(i + 1, len(r)):
            if (x[i] - x[j]) ** 2 + (y[i] - y[j]) ** 2 < (r[i] + r[j]) ** 2:
                return f"circles {i} and {j} overlap"
    return None


def _description(n: int) -> str:
    return (
        f"Circle packing: place {n} disjoint circles inside the unit square [0, 1] x [0, 1] so that the sum "
        f"of their radii is as large as possible. pack_circles is called once with n = {n} and returns a "
        f"pair (centres, radii): centres a float array of shape ({n}, 2) holding each circle's (x, y), "
        f"radii a float array of shape ({n},). Every circle must lie inside the square (r <= x <= 1 - r, "
        "the same for y) and no two may overlap (distance between centres >= sum of radii); touching is "
        "allowed. The check is exact, with no tolerance: values computed in floating point should keep "
        "a margin of about 1e-12. The goal is the largest sum of radii."
    )


class CirclePacking(Task):
    """The problem for one n; subclasses fix ``n`` (and with it the name, description and record)."""

    n: ClassVar[int]
    function_name = "pack_circles"
    signature = "def pack_circles(n: int) -> tuple[np.ndarray, np.ndarray]"
    reference_name = "AlphaEvolve's published construction"
    sense = "max"
    instance_seconds = 60.0  # a constructor may optimise its layout; there is one instance per split
    lockstep = 1

    def groups(self, split: SplitName) -> list[InstanceGroup]:
        return [InstanceGroup(f"n{self.n}", [{"n": self.n}])]

    async def drive(self, heuristic: Heuristic, instance: Instance) -> Packing:
        return packing_arrays(await heuristic(), int(instance["n"]), self.function_name)

    def answer(self, function: Callable[..., Any], state: Instance) -> Packing:
        n = int(state["n"])
        return packing_arrays(function(n), n, f"{self.function_name}({n})")

    def score(self, instance: Instance, solution: Any) -> float:
        centres, radii = packing_arrays(solution, int(instance["n"]), "a packing")
        violation = packing_violation(centres, radii)
        if violation is not None:
            raise InvalidSolution(violation)
        return math.fsum(radii.tolist())

    def references(self, split: SplitName, group: InstanceGroup) -> Sequence[float]:
        return [self.reference_objective(instance) for instance in group.instances]

    def reference_objective(self, instance: Instance) -> float:
        return RECORDS[int(instance["n"])]

    def seed_code(self) -> str:
        """One seed for every n: the constructor is given n."""
        return (SEED_DIR / "circle_packing.py").read_text()


class CirclePacking26(CirclePacking):
    name = "circle_packing_26"
    n = 26
    description = _description(26)


class CirclePacking32(CirclePacking):
    name = "circle_packing_32"
    n = 32
    description = _description(32)
