"""A fabric at the NICs' MTU (4,096-byte payloads) on the kernel data plane: its ports
carry a full DATA frame whole, the agents send packets of that size, and the eBPF
switch trims them to their headers under an incast, every byte still delivered."""

from __future__ import annotations

import pytest

from experiments.analysis.metrics import read_events, summarize
from experiments.dataplanes.targets import KernelTarget
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from hosts.protocol import NIC_MTU_PAYLOAD, interface_mtu


@pytest.fixture(scope="module")
def jumbo_network():
    from experiments.run.cleanup import find_leftovers
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock
    from topologies.model import load_topology

    with FabricLock("pytest: jumbo frames") as lock, \
            RunningFabric(load_topology("2tier-2plane", NIC_MTU_PAYLOAD), KernelTarget(),
                    lock) as network:
        yield network
    assert not find_leftovers()


def play(network, tmp_path, workload: str, params: dict):
    plan = phases(workload, params, network.fabric)
    run = run_transport(network, "mrc", plan, [], lambda a: None, tmp_path, 60.0, {}, print)
    return run, summarize(run, read_events(run.event_files))


def test_every_port_carries_a_full_nic_frame(jumbo_network):
    net, fabric = jumbo_network.net, jumbo_network.fabric
    assert fabric.spec.interface_mtu == interface_mtu(NIC_MTU_PAYLOAD) == 4176
    for node in (fabric.hosts[0], fabric.t0(0, 0), fabric.t1(1, 1)):
        for port in fabric.ports(node.name):
            found = net.get(node.name).cmd(f"cat /sys/class/net/{port.intf}/mtu").strip()
            assert int(found) == fabric.spec.interface_mtu, (node.name, port.intf)


def test_a_transfer_goes_in_packets_of_the_fabrics_mtu(jumbo_network, tmp_path):
    size = 2_000_000
    run, block = play(jumbo_network, tmp_path, "transfer",
                      {"src": 0, "dst": 3, "message_bytes": size})
    (result,) = run.transfers
    assert result.done and result.verified, result
    counters = block["agent_counters"]
    # 489 packets of 4,096 bytes, and a few sent again; 1,667 at the default MTU.
    packets = -(-size // NIC_MTU_PAYLOAD)
    assert packets <= counters["data_tx"] - counters.get("retransmits", 0) <= packets
    assert counters["data_tx"] < 1.2 * packets


def test_an_incast_of_nic_sized_packets_is_trimmed_and_delivered_whole(jumbo_network,
                                                                        tmp_path):
    if not jumbo_network.ebpf_switch_ports:
        pytest.skip("the eBPF switch program does not run here: no trimming")
    run, block = play(jumbo_network, tmp_path, "incast",
                      {"receiver": 3, "fan_in": 3, "message_bytes": 1_000_000})
    assert run.transfers and all(t.done and t.verified for t in run.transfers)
    counters = block["agent_counters"]
    # The receiver's port queues three senders' line rate: the switch trims 4,190-byte
    # frames to their headers and the receiver NACKs them.
    assert counters.get("trimmed_rx", 0) > 0, counters
