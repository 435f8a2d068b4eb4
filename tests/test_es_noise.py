"""The ES noise is a pure, layout-independent function of (seed, name, flat index) with Gaussian moments."""

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest

from coevo.es.noise import (
    NOISE_VERSION,
    PARALLEL_MIN_SIZE,
    accumulate_,
    fill_noise,
    get_num_threads,
    noise,
    noise_key,
    perturb_,
    perturb_all_,
    set_num_threads,
)


def test_chunked_fill_equals_whole_fill():
    whole = noise(7, "layers.0.mlp.up_proj.weight", 100_003)
    key = noise_key(7, "layers.0.mlp.up_proj.weight")
    for chunk in (1, 4096, 33_333):
        pieces = [
            fill_noise(np.empty(min(chunk, whole.size - start), np.float32), key, offset=start)
            for start in range(0, whole.size, chunk)
        ]
        assert np.array_equal(np.concatenate(pieces), whole)


def test_same_seed_and_name_give_same_values_and_shape_does_not_matter():
    flat = noise(3, "w", 600)
    assert np.array_equal(noise(3, "w", (20, 30)).reshape(-1), flat)
    assert not np.array_equal(noise(4, "w", 600), flat)


def test_values_are_pinned_to_the_noise_version():
    """Histories replay on any machine only if the generator never changes silently."""
    sample = noise(12345, "model.layers.0.self_attn.q_proj.weight", 4096)
    fingerprint = hashlib.sha256(sample.tobytes()).hexdigest()[:16]
    assert (NOISE_VERSION, fingerprint) == ("splitmix64-irwinhall4-cubic-v1", "c853f05c9b888469")


@pytest.mark.parametrize(
    ("seed_a", "name_a", "seed_b", "name_b"),
    [
        (0, "model.layers.0.self_attn.q_proj.weight", 0, "model.layers.1.self_attn.q_proj.weight"),
        (0, "w", 1, "w"),
        (1, "w", 0, "w.bias"),
    ],
)
def test_different_names_or_seeds_are_uncorrelated(seed_a, name_a, seed_b, name_b):
    a = noise(seed_a, name_a, 1_000_000).astype(np.float64)
    b = noise(seed_b, name_b, 1_000_000).astype(np.float64)
    assert abs(np.corrcoef(a, b)[0, 1]) < 5e-3  # 5 standard errors for 1M samples
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 5e-3  # neighbours within one stream too


def test_tensor_split_in_two_gets_the_slices_of_the_whole():
    rows, cols = 64, 48
    whole = noise(9, "o_proj.weight", (rows, cols))
    key = noise_key(9, "o_proj.weight")
    top = fill_noise(np.empty((rows // 2, cols), np.float32), key, offset=0)
    bottom = fill_noise(np.empty((rows // 2, cols), np.float32), key, offset=rows // 2 * cols)
    assert np.array_equal(np.vstack([top, bottom]), whole)


def test_fused_qkv_gets_the_noise_of_the_separate_projections():
    sizes = {"attn.q_proj.weight": 64 * 32, "attn.k_proj.weight": 16 * 32, "attn.v_proj.weight": 16 * 32}
    rng = np.random.default_rng(0)
    separate = {name: rng.standard_normal(size).astype(np.float32) for name, size in sizes.items()}
    fused = np.concatenate(list(separate.values()))
    start = 0
    for name, size in sizes.items():
        # A fused layout perturbs each slice under its canonical name; shards of one slice use offsets.
        half = size // 2
        perturb_(fused[start : start + half], fused[start : start + half], noise_key(5, name), 0.01)
        perturb_(fused[start + half : start + size], fused[start + half : start + size], noise_key(5, name), 0.01, half)
        perturb_(separate[name], separate[name], noise_key(5, name), 0.01)
        start += size
    assert np.array_equal(fused, np.concatenate(list(separate.values())))


def test_moments_and_distribution_are_near_gaussian():
    sample = noise(2024, "model.embed_tokens.weight", 4_000_000).astype(np.float64)
    centred = sample - sample.mean()
    assert abs(sample.mean()) < 5 / math.sqrt(sample.size)
    assert abs(sample.var() - 1.0) < 5e-3
    assert abs((centred**3).mean()) < 0.01
    assert abs((centred**4).mean() / sample.var() ** 2 - 3.0) < 0.03
    assert np.abs(sample).max() < 4.1
    for x in (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        assert abs((np.abs(sample) < x).mean() - math.erf(x / math.sqrt(2))) < 0.006


def test_perturb_matches_its_definition_in_place_and_out_of_place():
    src = np.random.default_rng(1).standard_normal((30, 70)).astype(np.float32)
    eps = noise(11, "w", src.shape, offset=5)
    expected = src + np.float32(-0.25) * eps
    out = np.empty_like(src)
    perturb_(out, src, noise_key(11, "w"), -0.25, offset=5)
    assert np.array_equal(out, expected)
    perturb_(src, src, noise_key(11, "w"), -0.25, offset=5)
    assert np.array_equal(src, expected)


def test_one_pass_over_many_tensors_equals_a_pass_per_tensor_whatever_the_cuts():
    rng = np.random.default_rng(3)
    sizes = [3_000_007, 1_234, PARALLEL_MIN_SIZE - 3_000_000, 5]
    assert sum(sizes) >= PARALLEL_MIN_SIZE  # enough in all for the threads to share
    sources = [rng.standard_normal(size).astype(np.float32) for size in sizes]
    keys = [noise_key(9, f"layer.{index}") for index in range(len(sizes))]
    expected = []
    for source, key in zip(sources, keys, strict=True):
        out = np.empty_like(source)
        perturb_(out, source, key, 0.5)
        expected.append(out)
    default_threads = get_num_threads()
    try:
        for threads in (1, 2, 3):  # cuts fall inside tensors, at different places
            set_num_threads(threads)
            outs = [np.empty_like(source) for source in sources]
            perturb_all_(list(zip(outs, sources, keys, strict=True)), 0.5)
            assert all(np.array_equal(out, want) for out, want in zip(outs, expected, strict=True))
            in_place = [source.copy() for source in sources]
            perturb_all_([(array, array, key) for array, key in zip(in_place, keys, strict=True)], 0.5)
            assert all(np.array_equal(out, want) for out, want in zip(in_place, expected, strict=True))
    finally:
        set_num_threads(default_threads)


@pytest.mark.parametrize("size", [50_000, PARALLEL_MIN_SIZE + 4321])  # serial and threaded kernels
def test_accumulate_is_the_fp32_sum_of_members_in_order_whatever_the_thread_count(size):
    dst = np.random.default_rng(2).standard_normal(size).astype(np.float32)
    seeds, coeffs = [3, 1, 4, 1, 5], np.array([0.5, -1.25, 2.0, 0.125, -0.75], np.float32)
    total = np.zeros(size, np.float32)
    for seed, coeff in zip(seeds, coeffs, strict=True):
        total += coeff * noise(seed, "w", size, offset=17)
    keys = np.array([noise_key(s, "w") for s in seeds], np.uint64)
    results = []
    default_threads = get_num_threads()
    try:
        for threads in (1, 3):  # 3 slices that need not align with the kernel's accumulation blocks
            set_num_threads(threads)
            out = dst.copy()
            accumulate_(out, keys, coeffs, offset=17)
            results.append(out)
    finally:
        set_num_threads(default_threads)
    assert np.array_equal(results[0], dst + total)
    assert np.array_equal(results[1], results[0])


def test_bad_inputs_fail_with_clear_errors():
    with pytest.raises(TypeError, match="float32"):
        perturb_(np.zeros(4), np.zeros(4), noise_key(0, "w"), 1.0)
    with pytest.raises(ValueError, match="contiguous"):
        fill_noise(np.zeros((4, 4), np.float32)[:, ::2], noise_key(0, "w"))
    shared = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        perturb_(shared[1:], shared[:-1], noise_key(0, "w"), 1.0)
    with pytest.raises(ValueError, match="offset"):
        fill_noise(np.zeros(4, np.float32), noise_key(0, "w"), offset=-1)
    with pytest.raises(ValueError, match="seed"):
        noise_key(-1, "w")
    with pytest.raises(ValueError, match="threads"):
        set_num_threads(0)
    with pytest.raises(ValueError, match="equal length"):
        accumulate_(np.zeros(4, np.float32), np.zeros(2, np.uint64), np.zeros(3, np.float32))


def test_first_kernel_call_adds_no_runtime_memory():
    """The kernels are compiled ahead of time: perturbing must not load a JIT runtime (numba + LLVM
    cost ~100 MiB of resident memory, which would break ES's inference-level memory)."""
    probe = """
import re
from pathlib import Path
import numpy as np
from coevo.es.noise import noise_key, perturb_, accumulate_
def rss_kib():
    return int(re.search(r"VmRSS:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
weights = np.ones(1 << 16, np.float32)  # touched before the baseline is read
before = rss_kib()
perturb_(weights, weights, noise_key(1, "w"), 0.1)
accumulate_(weights, np.array([noise_key(2, "w")]), np.array([0.5]))
print(rss_kib() - before)
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert int(run.stdout) < 2048  # KiB
