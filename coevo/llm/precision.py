"""Which float type an in-process model computes in: bf16 where the CPU multiplies bf16 natively, fp32
elsewhere, unless the user names one.

Why it matters: on CPUs with bf16 matrix units (AMX, AVX512-BF16) a bf16 forward pass is much faster
than fp32; elsewhere bf16 is emulated and slower. Texts differ between the two types, so a run records
the type it used and a resume replays on that type. ES stays exact either way: the weights host keeps
an fp32 master and writes casts of it (`coevo.es.host`). No torch here, so config checks stay fast.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

ComputeDtype = Literal["float32", "bfloat16"]
DtypeChoice = Literal["auto", "float32", "bfloat16"]
NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
"""CPU feature flags (as /proc/cpuinfo names them) of hardware bf16 matrix arithmetic."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags; empty where the system does not list them (not Linux)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_has_native_bf16(flags: Iterable[str] | None = None) -> bool:
    """Whether the CPU (or the given flags) multiplies bf16 in hardware."""
    return bool(NATIVE_BF16_FLAGS & frozenset(cpu_flags() if flags is None else flags))


def compute_dtype(choice: DtypeChoice = "auto", flags: Iterable[str] | None = None) -> ComputeDtype:
    """The type a model computes in: `choice` itself, or for "auto" bf16 where native, else fp32."""
    if choice == "auto":
        return "bfloat16" if cpu_has_native_bf16(flags) else "float32"
    if choice not in ("float32", "bfloat16"):
        raise ValueError(f"dtype must be 'auto', 'float32' or 'bfloat16', got {choice!r}")
    return choice
