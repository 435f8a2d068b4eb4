"""Shared fixtures."""

from __future__ import annotations

import sys

import pytest

from coevo import threads


@pytest.fixture
def one_torch_thread():
    """Tiny matrices: a second intra-op thread only spin-waits on a shared 2-core CPU."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def no_thread_choice_between_tests(monkeypatch: pytest.MonkeyPatch):
    """A command run in one test makes torch's thread count automatic (`coevo.threads`) and may set it:
    the next test starts without that choice, on the count torch had."""
    monkeypatch.setattr(threads, "_policy", threads._Policy())
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if previous is not None and torch is not None and torch.get_num_threads() != previous:
        torch.set_num_threads(previous)
