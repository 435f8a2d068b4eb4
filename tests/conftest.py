"""Shared fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """Tiny matrices: a second intra-op thread only spin-waits on a shared 2-core CPU."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
