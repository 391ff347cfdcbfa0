"""PFC on a fabric split across namespace servers: the single-plane twin of 2tier-2plane
(the RoCE baseline's fabric) with its hosts on one server and its plane on another. An
incast with `roce-8-pfc` (PFC alone) fills the receiving T0's lossless queue on the
plane's server; the pauses the eBPF program decides there are read from its ring by a
process on that server (experiments/dataplanes/pfc.py, topologies/ebpf_program.py
`LineRing`) and carried out at the NICs on the hosts' server: pauses reach the NICs,
every byte arrives, the lossless class loses nothing. The T0's queue to the receiver is
sampled on the plane's server through the run (experiments/dataplanes/queue_sampler.py)
and seen to fill and pause. Skipped with the reason where
the program cannot run (clang, bpftool, cls_bpf)."""

from __future__ import annotations

import os

import pytest

from experiments.dataplanes.queue_sampler import SAMPLE_S, QueueSampler
from experiments.dataplanes.targets import KernelTarget
from experiments.dataplanes.twin import twin_of
from experiments.run.cleanup import find_leftovers
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock
from experiments.scenarios.workloads import phases
from tests.integration.test_split_fabric import play
from topologies.model import load_topology, with_rate_cap
from topologies.nsserver import SSHD, NamespaceServers
from topologies.placement import load_placement

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason=f"{SSHD} is missing (openssh-server: make deps)")
CLUSTER = """servers:
  hosts: {namespace: true, hosts: all}
  plane0: {namespace: true, planes: [0]}
"""


def test_pfc_pauses_decided_on_a_planes_server_hold_the_nics_on_the_hosts(tmp_path):
    harness = NamespaceServers(tmp_path / "servers")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    try:
        harness.start(["hosts", "plane0"])
        _incast(harness, cluster, tmp_path)
    finally:
        harness.stop()
    assert not find_leftovers()


def _incast(harness, cluster, tmp_path) -> None:
    fabric = load_topology("2tier-2plane")
    twin = with_rate_cap(twin_of(fabric), 8.0)
    placement = load_placement(cluster, fabric, harness)  # as a run places its twin
    with FabricLock("pytest: split twin") as lock, \
            RunningFabric(twin, KernelTarget(), lock, placement=placement) as network:
        if not network.ebpf_ports.ports:
            pytest.skip(network.ebpf.reason)
        plan = [list(p) for p in phases("incast", {"message_bytes": 1_000_000, "receiver": 0},
                                        twin)]
        receiving_t0 = twin.t0(0, twin.host(0).rack).name
        sampler = QueueSampler(network, receiving_t0, "h0")
        try:
            summary, _, ports = play(network, "roce-8-pfc", plan, tmp_path)
        finally:
            sampler.stop()
        events = network.pfc.events
    assert summary["ok"] and summary["verified"], summary
    assert events > 0, "no pause reached a NIC"
    assert ports["host_ports"]["dropped"] == ports["fabric_ports"]["dropped"] == 0, ports
    # The T0's queue to h0, sampled on the plane's server and put on this machine's
    # clock: the same clock here (namespace servers), so the estimate is near zero.
    assert abs(sampler.clock_offset_ns) < 20_000_000, sampler.clock_offset_ns
    samples = sampler.samples
    assert len(samples) >= 0.5 * summary["workload_s"] / SAMPLE_S, len(samples)
    assert max(s[1] for s in samples) >= 3 * twin.spec.data_frame_bytes, samples[-5:]
    assert any(s[2] > 0 for s in samples), "no sample saw the T0 pausing a sender"
    assert samples[-1][1] == 0 and samples[-1][2] == 0, samples[-5:]  # drained after
