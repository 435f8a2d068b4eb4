"""The compute dtype an in-process model gets: bf16 where the CPU has native bf16 units, else fp32."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.llm.precision import compute_dtype, cpu_flags, cpu_has_native_bf16

AVX2_ONLY = {"fpu", "sse4_2", "avx", "avx2", "fma"}


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        (AVX2_ONLY, False),
        (AVX2_ONLY | {"avx512f", "avx512bw"}, False),  # AVX-512 without its bf16 extension
        (AVX2_ONLY | {"avx512f", "avx512_bf16"}, True),
        (AVX2_ONLY | {"amx_tile", "amx_bf16"}, True),
        (set(), False),
    ],
)
def test_auto_picks_bf16_only_where_the_cpu_multiplies_it_natively(flags: set[str], native: bool) -> None:
    assert cpu_has_native_bf16(flags) is native
    assert compute_dtype("auto", flags) == ("bfloat16" if native else "float32")


def test_a_named_dtype_overrides_the_cpu() -> None:
    assert compute_dtype("float32", {"amx_bf16"}) == "float32"
    assert compute_dtype("bfloat16", AVX2_ONLY) == "bfloat16"
    with pytest.raises(ValueError, match="float16"):
        compute_dtype("float16")  # type: ignore[arg-type]


def test_flags_are_read_from_cpuinfo_and_missing_cpuinfo_means_none(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "amx_bf16"}
    assert cpu_flags(tmp_path / "absent") == frozenset()
