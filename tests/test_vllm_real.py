"""The real vLLM engine against transformers on SmolLM2 (runs only where vLLM is installed, e.g. in the
venv `make vllm-cpu-check` builds): every check of experiments/bench/vllm_check.py --quick must pass."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed: `make vllm-cpu-check` (CPU) or experiments/bench/vllm_check.py (GPU)",
    ),
]


def test_vllm_perturbs_like_transformers_and_replays_to_the_same_hash() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "experiments/bench/vllm_check.py"), "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    # vLLM may log after the results line; the results are the last line that is a JSON object
    results = json.loads(next(line for line in reversed(completed.stdout.splitlines()) if line.startswith("{")))
    assert results["failures"] == [] and completed.returncode == 0, results
    assert results["served_weights_hash_as_transformers_loads_them"] and results["es_run_replays_to_the_same_hash"]
