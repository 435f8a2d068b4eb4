"""Layout-independent ES noise: eps = f(seed, canonical parameter name, flat element index).

Why a counter-based generator instead of a seeded stream (torch.Generator per tensor): the value of
one element never depends on how the tensor is chunked, sharded, fused (q|k|v) or on which machine it
is computed, so a seed recorded in the history always means the same direction, and two same-shaped
layers never share noise because the name is part of the key.

Generator: a 64-bit key = blake2b(seed, name); element i gets the SplitMix64 finaliser of
key + i * golden_gamma; its four 16-bit lanes are summed (Irwin-Hall, n=4), standardised, and bent by
a cubic x * (a + b x^2) whose two constants make the variance 1 and the kurtosis 3 (Gaussian
moments up to the fourth; support |eps| < 4.07). All arithmetic is integer or plain fp32 without
fused multiply-add, so results are bit-identical on every run and machine.

The kernels are C (`_noise_kernels.c`, built with the package), not JIT-compiled, so no perturbing
process carries a JIT runtime in its resident memory. They fuse generation with the memory pass that
uses the noise (perturb, accumulate), so the noise is never materialised (timings against torch.randn:
experiments/bench/RESULTS.md). A pass over many tensors is cut into equal parts by flat offset, one per
thread, which by construction gives the same bits as one pass.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

try:
    from coevo.es import _noise_kernels
except ImportError as error:  # a source checkout that was never built
    raise ImportError(
        "coevo.es._noise_kernels is not compiled; install coevo with `pip install -e .` (needs a C compiler)"
    ) from error

NOISE_VERSION = "splitmix64-irwinhall4-cubic-v1"

# Below this many elements in all a pass runs on the calling thread: one thread fills a smaller pass
# before extra threads would have started (the fill rate is in experiments/bench/RESULTS.md).
PARALLEL_MIN_SIZE = 1 << 23

_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def set_num_threads(threads: int) -> None:
    """How many threads share one large tensor (default: the CPUs this process may run on)."""
    global _threads
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    _threads = threads


def get_num_threads() -> int:
    """The thread count `set_num_threads` last set."""
    return _threads


def noise_key(seed: int, name: str) -> np.uint64:
    """The 64-bit stream key of one (seed, canonical parameter name); stable across processes."""
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    digest = hashlib.blake2b(
        seed.to_bytes(8, "little") + name.encode("utf-8"), digest_size=8, person=b"coevo-es"
    ).digest()
    return np.uint64(int.from_bytes(digest, "little"))


class _Call(NamedTuple):
    """One kernel call over flat arrays of equal length, whose element 0 has noise index `offset`."""

    kernel: Callable[..., None]
    arrays: tuple[np.ndarray, ...]
    args: tuple[object, ...]
    offset: int


def _run(calls: Sequence[_Call]) -> None:
    """Run the calls with their total work cut into equal contiguous parts, one per thread.

    Laying the arrays end to end before cutting keeps every core busy even when most arrays are
    mid-sized (a model's weight matrices); an element's noise depends only on its key and index, so
    any cut gives the same bits.
    """
    total = sum(call.arrays[0].size for call in calls)
    threads = _threads if total >= PARALLEL_MIN_SIZE else 1
    if threads == 1:
        _run_serially(calls)
        return
    share = -(-total // threads)
    parts: list[list[_Call]] = [[] for _ in range(threads)]
    part, room = 0, share
    for call in calls:
        lo, size = 0, call.arrays[0].size
        while lo < size:
            hi = min(size, lo + room)
            parts[part].append(call._replace(arrays=tuple(a[lo:hi] for a in call.arrays), offset=call.offset + lo))
            room -= hi - lo
            lo = hi
            if room == 0:
                part, room = part + 1, share
    with ThreadPoolExecutor(threads) as pool:
        for finished in [pool.submit(_run_serially, part_calls) for part_calls in parts]:
            finished.result()


def _run_serially(calls: Sequence[_Call]) -> None:
    for call in calls:
        call.kernel(*call.arrays, *call.args, call.offset)


def _flat_f32(array: np.ndarray, role: str) -> np.ndarray:
    if array.dtype != np.float32:
        raise TypeError(f"{role} must be float32, got {array.dtype}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{role} must be C-contiguous so that flat indices match the canonical layout")
    return array.reshape(-1)


def _offset(offset: int) -> int:
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return int(offset)


def fill_noise(out: np.ndarray, key: np.uint64, offset: int = 0) -> np.ndarray:
    """Write eps(key, offset + i) into every element i of `out` (float32, C-contiguous); return it."""
    _run([_Call(_noise_kernels.fill, (_flat_f32(out, "out"),), (int(key),), _offset(offset))])
    return out


def noise(seed: int, name: str, shape: int | tuple[int, ...], offset: int = 0) -> np.ndarray:
    """A fresh float32 array of the noise of parameter `name` under `seed`, starting at flat `offset`."""
    return fill_noise(np.empty(shape, dtype=np.float32), noise_key(seed, name), offset)


def perturb_(dst: np.ndarray, src: np.ndarray, key: np.uint64, scale: float, offset: int = 0) -> None:
    """dst[i] = src[i] + scale * eps(key, offset + i), in one pass; `src` may be `dst` (in place)."""
    _run([_perturb_call(dst, src, key, scale, offset)])


def perturb_all_(triples: Sequence[tuple[np.ndarray, np.ndarray, np.uint64]], scale: float) -> None:
    """`perturb_(dst, src, key, scale)` for every (dst, src, key), as one job shared by the threads."""
    _run([_perturb_call(dst, src, key, scale, 0) for dst, src, key in triples])


def _perturb_call(dst: np.ndarray, src: np.ndarray, key: np.uint64, scale: float, offset: int) -> _Call:
    flat_dst, flat_src = _flat_f32(dst, "dst"), _flat_f32(src, "src")
    if flat_dst.size != flat_src.size:
        raise ValueError(f"dst has {flat_dst.size} elements but src has {flat_src.size}")
    start = _offset(offset)
    if flat_dst.ctypes.data == flat_src.ctypes.data:
        return _Call(_noise_kernels.add, (flat_dst,), (int(key), float(scale)), start)
    if np.may_share_memory(flat_dst, flat_src):
        raise ValueError("dst and src overlap without being the same array")
    return _Call(_noise_kernels.perturb, (flat_dst, flat_src), (int(key), float(scale)), start)


def accumulate_(dst: np.ndarray, keys: np.ndarray, coeffs: np.ndarray, offset: int = 0) -> None:
    """dst[i] += sum_j coeffs[j] * eps(keys[j], offset + i): a whole ES update in one pass over dst.

    The per-element sum is formed in fp32 in the order of `keys`, then added to dst once.
    """
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    coeffs = np.ascontiguousarray(coeffs, dtype=np.float32)
    if keys.shape != coeffs.shape or keys.ndim != 1:
        raise ValueError(f"keys {keys.shape} and coeffs {coeffs.shape} must be 1-D and of equal length")
    _run([_Call(_noise_kernels.accumulate, (_flat_f32(dst, "dst"),), (keys, coeffs), _offset(offset))])
