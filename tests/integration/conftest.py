"""Fixtures for Mininet tests on the kernel data plane (root, Linux >= 6.1)."""

from __future__ import annotations

import os

import pytest

from experiments.dataplane import KERNEL_MIN, kernel_version


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (Mininet namespaces)"
    if kernel_version() < KERNEL_MIN:
        return "the kernel data plane needs Linux >= 6.1 (SRv6 NEXT-C-SID)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not installed (make deps)"
    return None


SKIP = _skip_reason()


def pytest_collection_modifyitems(config, items):
    if SKIP:
        marker = pytest.mark.skip(reason=SKIP)
        for item in items:
            item.add_marker(marker)


@pytest.fixture(scope="module")
def kernel_network():
    """A started, shaped and programmed 2tier-2plane network: yields (net, fabric)."""
    from experiments.bringup import running
    from experiments.cleanup import find_leftovers
    from experiments.targets import KernelTarget
    from topologies.model import load_topology

    with running(load_topology("2tier-2plane"), KernelTarget()) as network:
        yield network.net, network.fabric
    assert not find_leftovers()
