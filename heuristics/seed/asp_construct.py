"""Seed for admissible sets: prefer vectors whose blocks rotate, i.e. expand into more vectors."""


def priority(el: tuple[int, ...], n: int, w: int) -> float:
    """Count the blocks of three coordinates that are not constant.

    Each non-constant block has three cyclic rotations, so a vector with k such blocks stands
    for 3**k vectors of the final set; taking those first grows the set fastest.
    """
    blocks = (el[i : i + 3] for i in range(0, n, 3))
    return float(sum(1 for block in blocks if len(set(block)) > 1))
