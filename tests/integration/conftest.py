"""Fixtures for Mininet tests on the kernel data plane (root, Linux >= 6.1).

Where root, a recent kernel or Mininet is missing, the tests of this folder (and only
those: pytest calls this hook with every collected item) are skipped with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments.dataplanes.choice import KERNEL_MIN, kernel_version


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
HERE = Path(__file__).resolve().parent


def skip_here(items, reason: str | None, folder: Path = HERE) -> None:
    """Mark the items collected from `folder` skipped with `reason` (if any)."""
    if not reason:
        return
    marker = pytest.mark.skip(reason=reason)
    for item in items:
        if Path(item.path).resolve().is_relative_to(folder):
            item.add_marker(marker)


def pytest_collection_modifyitems(config, items):
    skip_here(items, SKIP)


@pytest.fixture(scope="module")
def kernel_network():
    """A started, shaped and programmed 2tier-2plane network: yields the running fabric
    (experiments/run/fabric.py RunningFabric: its `net`, its `fabric`, ...)."""
    from experiments.dataplanes.targets import KernelTarget
    from experiments.run.cleanup import find_leftovers
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock
    from topologies.model import load_topology

    with FabricLock("pytest: kernel fabric") as lock, \
            RunningFabric(load_topology("2tier-2plane"), KernelTarget(), lock) as network:
        yield network
    assert not find_leftovers()


@pytest.fixture(scope="module")
def fabric_with_ebpf(kernel_network):
    """`kernel_network` with the eBPF switch program on its ports, or a skip saying why
    the program could not run here."""
    from experiments.dataplanes import ebpf_switch

    network = kernel_network
    if not network.ebpf_ports.ports:
        status = ebpf_switch.prepare(network.net.get(network.fabric.hosts[0].name).pid)
        pytest.skip(status.reason)
    return network
