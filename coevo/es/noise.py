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

The kernels are C (`_noise_kernels.c`, built with the package): a JIT runtime would cost every
perturbing process ~100 MiB of resident memory. They fuse generation with the memory pass that uses
the noise (perturb, accumulate), so the noise is never materialised: filling and adding 135M elements
takes ~0.07 s on one core of this machine against ~0.6-1.8 s for torch.randn. Large tensors are split
between threads by flat offset, which by construction gives the same bits as one pass.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

try:
    from coevo.es import _noise_kernels
except ImportError as error:  # a source checkout that was never built
    raise ImportError(
        "coevo.es._noise_kernels is not compiled; install coevo with `pip install -e .` (needs a C compiler)"
    ) from error

NOISE_VERSION = "splitmix64-irwinhall4-cubic-v1"

# Below this many elements a kernel runs on the calling thread: one thread fills ~1e9 elements/s, so
# smaller tensors finish before extra threads would have started.
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


def _run(kernel: Callable[..., None], arrays: tuple[np.ndarray, ...], *args: object, offset: int) -> None:
    """Call `kernel(*arrays, *args, offset)`, split into contiguous slices across threads when large."""
    size = arrays[0].size
    threads = _threads if size >= PARALLEL_MIN_SIZE else 1
    if threads == 1:
        kernel(*arrays, *args, offset)
        return
    bounds = np.linspace(0, size, threads + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(threads) as pool:
        slices = [
            pool.submit(kernel, *(a[lo:hi] for a in arrays), *args, offset + lo)
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        for piece in slices:
            piece.result()


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
    _run(_noise_kernels.fill, (_flat_f32(out, "out"),), int(key), offset=_offset(offset))
    return out


def noise(seed: int, name: str, shape: int | tuple[int, ...], offset: int = 0) -> np.ndarray:
    """A fresh float32 array of the noise of parameter `name` under `seed`, starting at flat `offset`."""
    return fill_noise(np.empty(shape, dtype=np.float32), noise_key(seed, name), offset)


def perturb_(dst: np.ndarray, src: np.ndarray, key: np.uint64, scale: float, offset: int = 0) -> None:
    """dst[i] = src[i] + scale * eps(key, offset + i), in one pass; `src` may be `dst` (in place)."""
    flat_dst, flat_src = _flat_f32(dst, "dst"), _flat_f32(src, "src")
    if flat_dst.size != flat_src.size:
        raise ValueError(f"dst has {flat_dst.size} elements but src has {flat_src.size}")
    start = _offset(offset)
    if flat_dst.ctypes.data == flat_src.ctypes.data:
        _run(_noise_kernels.add, (flat_dst,), int(key), float(scale), offset=start)
        return
    if np.may_share_memory(flat_dst, flat_src):
        raise ValueError("dst and src overlap without being the same array")
    _run(_noise_kernels.perturb, (flat_dst, flat_src), int(key), float(scale), offset=start)


def accumulate_(dst: np.ndarray, keys: np.ndarray, coeffs: np.ndarray, offset: int = 0) -> None:
    """dst[i] += sum_j coeffs[j] * eps(keys[j], offset + i): a whole ES update in one pass over dst.

    The per-element sum is formed in fp32 in the order of `keys`, then added to dst once.
    """
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    coeffs = np.ascontiguousarray(coeffs, dtype=np.float32)
    if keys.shape != coeffs.shape or keys.ndim != 1:
        raise ValueError(f"keys {keys.shape} and coeffs {coeffs.shape} must be 1-D and of equal length")
    _run(_noise_kernels.accumulate, (_flat_f32(dst, "dst"),), keys, coeffs, offset=_offset(offset))
