"""Per-request sampling seeds, shared by every backend so that a seed means the same thing everywhere.

A call `generate(requests, SamplingParams(seed=s, first_request=k))` samples request i from its own
stream `request_seed(s, k + i)` (`SamplingParams.seed_for`); `k` lets a caller split one logical batch
into several calls without moving any request to another stream. Hashing (rather than `s + i`) keeps
the calls seeded 0, 1, 2, ... from sharing streams, which would make "independent" samples of the same
prompt identical. A server request that carries `seed=request_seed(s, i)` therefore reproduces request
i of the in-process call.
"""

from __future__ import annotations

import hashlib

SEED_BITS = 63  # fits a signed 64-bit integer: torch generators and JSON clients both accept it


def request_seed(seed: int | None, index: int) -> int | None:
    """The seed of request `index` of a call seeded `seed`; None stays None (fresh entropy)."""
    if seed is None:
        return None
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)
