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


def with_thresholds(fabric: Fabric, ecn: int = 16, trim: int = 48) -> Fabric:
    """`fabric` with the marking step and trim threshold of a test written for them
    (the shipped topologies' thresholds before they followed the BDP): a test of a
    mechanism keeps the regime it was measured in."""
    return build_fabric(dataclasses.replace(
        fabric.spec, ecn_threshold_pkts=ecn, ecn_kmax_pkts=ecn, trim_threshold_pkts=trim,
        trim_lasthop_pkts=trim))
