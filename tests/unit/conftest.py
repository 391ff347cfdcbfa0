"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from topologies.model import load_topology


@pytest.fixture(scope="module")
def fabric():
    """2tier-2plane: h0 h1 in rack 0, h2 h3 in rack 1, two planes of two T1s."""
    return load_topology("2tier-2plane")
