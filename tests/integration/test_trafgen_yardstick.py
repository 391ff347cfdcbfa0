"""make bench's C yardstick (bench/trafgen.py) on a real fabric: trafgen's packets, sent
down h0's uSID paths, arrive at h1's ports, and the count is what h1's interfaces
received, not what was sent. Skipped with the reason where trafgen is missing."""

from __future__ import annotations

import pytest

from bench import trafgen
from bench.agent_throughput import fast_topology
from experiments.dataplanes.targets import KernelTarget
from hosts.protocol import DEFAULT_MTU_PAYLOAD, MRC_HEADER_BYTES
from topologies.model import load_topology
from topologies.paths import catalogue


def test_trafgen_packets_cross_the_fabric_and_are_counted_where_they_arrive(tmp_path):
    missing = trafgen.available()
    if missing:
        pytest.skip(missing)
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock

    fabric = load_topology(str(fast_topology(tmp_path, DEFAULT_MTU_PAYLOAD)))
    size = fabric.spec.mtu_payload + MRC_HEADER_BYTES
    with FabricLock("pytest: the C yardstick") as lock, \
            RunningFabric(fabric, KernelTarget(), lock) as network:
        paths = catalogue(fabric, 0, 1)
        one = trafgen.blast(network.net, fabric, paths[:1], tmp_path, 0.5, size)
        # A path's address that no switch holds: nothing arrives.
        lost = trafgen.blast(network.net, fabric, [
            type(paths[0])(0, 1, 0, 0, (0xFFF0,), 0)], tmp_path, 0.5, size)
    assert one["senders_ok"] and lost["senders_ok"], (one, lost)
    assert one["pps"] > 1000, one  # a C sender through two switches, on any machine
    # Next to nothing: what reaches h1's ports besides the blast (neighbour discovery).
    assert lost["pps"] < one["pps"] / 100, (one, lost)
