"""Each peer framework in its own virtual environment under experiments/peers/.venvs/ (git-ignored).

The peers pin what coevo cannot share (llm4ad: numpy<2, Python < 3.13; shinka-evolve: httpx==0.27),
so none of them is ever installed into coevo's venv. A venv counts as ready once its marker file
exists, which is written only after pip and an import check succeed, so an interrupted install is
redone, not trusted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
VENVS_DIR = PEERS_DIR / ".venvs"
TORCH_PIN = "torch==2.13.0"
TRANSFORMERS_PIN = "transformers==5.24.0"

REQUIREMENTS: dict[str, tuple[list[str], str]] = {
    # peer: (pip arguments, module whose import proves the install)
    "openevolve": (["openevolve==0.4.0"], "openevolve"),
    # torch is one of llm4ad's declared dependencies: pin it to the CPU build on local disk.
    "llm4ad": (["llm4ad==1.11", "numpy<2", TORCH_PIN], "llm4ad"),
    "shinka": (["shinka-evolve==0.0.7"], "shinka"),
}


def python_of(peer: str) -> Path:
    """The interpreter of a peer's venv."""
    return VENVS_DIR / peer / "bin" / "python"


def is_ready(peer: str) -> bool:
    return (VENVS_DIR / peer / ".ready").is_file()


def install(peer: str) -> Path:
    """Create the peer's venv and pip install it (no-op when already done); its interpreter."""
    if peer not in REQUIREMENTS:
        raise ValueError(f"unknown peer {peer!r}; known peers: {', '.join(REQUIREMENTS)}")
    if is_ready(peer):
        return python_of(peer)
    if sys.version_info >= (3, 13) and peer == "llm4ad":
        raise RuntimeError("llm4ad 1.11 needs Python < 3.13 (it declares Requires-Python <3.13)")
    target = VENVS_DIR / peer
    venv.EnvBuilder(with_pip=True, clear=True).create(target)
    packages, module = REQUIREMENTS[peer]
    python = str(python_of(peer))
    subprocess.run([python, "-m", "pip", "install", "-q", *packages], check=True)
    subprocess.run([python, "-c", f"import {module}"], check=True)
    (target / ".ready").write_text(" ".join(packages) + "\n")
    return python_of(peer)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Install the peer frameworks, each into its own venv.")
    parser.add_argument("peers", nargs="*", metavar="PEER", help=f"any of {', '.join(REQUIREMENTS)} (default: all)")
    peers = parser.parse_args().peers or list(REQUIREMENTS)
    if unknown := [name for name in peers if name not in REQUIREMENTS]:
        parser.error(f"unknown peer {unknown[0]!r}; known peers: {', '.join(REQUIREMENTS)}")
    for name in peers:
        print(f"{name}: {install(name)}", flush=True)
