"""Small fabrics for tests that need only so many hosts (workloads, routing rules)."""

from __future__ import annotations

import dataclasses

from topologies.model import Fabric, build_fabric, load_topology


def hosts(n: int, racks: int | None = None) -> Fabric:
    """A one-plane fabric of `n` hosts, in two racks when `n` is even (else one)."""
    racks = racks or (2 if n % 2 == 0 else 1)
    spec = load_topology("2tier-2plane").spec
    return build_fabric(dataclasses.replace(spec, name=f"{n}-hosts", planes=1, racks=racks,
                                            hosts_per_rack=n // racks))
