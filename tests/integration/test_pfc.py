"""PFC on the kernel data plane: a RoCE incast on a single-plane fabric loses nothing.

The single-plane twin of 2tier-2plane (experiments/dataplanes/twin.py: 4 hosts, 2 racks, 2 T1s)
is brought up as a run brings up the RoCE baseline's fabric, with the eBPF switch
program on every port and the pauses it decides carried out (experiments/dataplanes/pfc.py). Every
other host sends 1 MB to h0 at once with `roce-8-pfc` (PFC alone: without DCQCN
nothing slows the senders before the last hop's queue passes XOFF), and then with
`roce-8` (PFC and DCQCN). The lossless class must lose no packet anywhere; the pauses
are counted where they are sent and where they are received, back to the senders'
NICs, and each port's paused time is read; a paused switch port's real lossless queue
is held until its resume (a tbf leaf shut, pfc.py), on crafted frames and through the
incast. The receiving T0's queue to h0 is sampled through each run
(experiments/dataplanes/queue_sampler.py) as make paper's Fig. 22 rows sample it.
The twin's links are capped at RATE_CAP_MBIT: three senders at the uncapped 40 Mbit/s
offer 120 Mbit/s to agents and switches on two cores, more than a 2-core machine
emulates (make calibrate: 40-56 Mbit/s per core), and a machine that falls behind loses
packets outside the emulated queues, where no pause can hold them.
Skipped with the reason where the program cannot run (clang, bpftool, cls_bpf).
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from experiments.analysis.metrics import read_events, summarize
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.queue_sampler import SAMPLE_S, QueueSampler
from experiments.dataplanes.switch_counters import counter_totals
from experiments.dataplanes.targets import KernelTarget, apply_fault
from experiments.dataplanes.twin import twin_of
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from hosts import protocol
from topologies import netns
from topologies.model import load_topology, with_rate_cap

RATE_CAP_MBIT = 8.0  # three senders offer 24 Mbit/s: a fifth of what two cores emulate


@pytest.fixture(scope="module")
def twin_network():
    from experiments.run.cleanup import find_leftovers
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock

    with FabricLock("pytest: the twin's PFC") as lock, \
            RunningFabric(with_rate_cap(twin_of(load_topology("2tier-2plane")), RATE_CAP_MBIT),
                    KernelTarget(), lock) as network:
        if not network.ebpf_ports.ports:
            pytest.skip(network.ebpf.reason)
        yield network
    assert not find_leftovers()


@pytest.fixture(scope="module")
def incast(twin_network, tmp_path_factory):
    """transport -> (summary block with the receiving T0's queue to h0 sampled through
    the run, what the ports counted)."""
    fabric = twin_network.fabric
    plan = [list(p) for p in phases("incast", {"message_bytes": 1_000_000, "receiver": 0},
                                    fabric)]
    receiving_t0 = fabric.t0(0, fabric.host(0).rack).name
    out = {}
    for transport in ("roce-8-pfc", "roce-8"):
        before = ebpf_switch.read_counters(twin_network)
        sampler = QueueSampler(twin_network, receiving_t0, "h0")
        run = run_transport(twin_network, transport, [list(p) for p in plan], [],
                            lambda step: apply_fault(twin_network, step),
                            tmp_path_factory.mktemp(transport), 60.0, {}, print)
        block = summarize(run, read_events(run.event_files))
        sampler.stop()
        block["queue"] = sampler.result(run.start)
        out[transport] = block, counter_totals(fabric, before,
                                               ebpf_switch.read_counters(twin_network))
    return out


@pytest.mark.parametrize("transport", ["roce-8-pfc", "roce-8"])
def test_a_roce_incast_drops_nothing(incast, transport):
    block, ports = incast[transport]
    assert block["ok"] and block["verified"], block
    for group in ports.values():
        assert group["dropped"] == 0 and group["fault_dropped"] == 0, ports
        assert group["trim_pkts"] == 0, ports
        # Nor did a real queue drop what the model held: the machine kept up.
        assert group["queue_dropped"] == 0, ports
    # No receiver saw a gap in a queue pair's packets (a gap is a loss: go-back-N NAKs
    # it). A retransmission timeout may fire without a loss: the emulation holds an
    # incast at the senders' NICs, not in the switches, so a sender in the receiver's
    # rack can queue behind packets a real fabric would hold upstream (docs/protocol.md,
    # "PFC, by data plane").
    assert block["path_events"].get("gap", 0) == 0, block["path_events"]
    assert block["path_events"].get("nak", 0) == 0, block["path_events"]


def test_pfc_pauses_back_to_the_senders_nics(incast):
    _, ports = incast["roce-8-pfc"]
    # The last hop's queue pauses its upstream ports; the pauses reach the NICs.
    sent = ports["host_ports"]["pfc_xoff_tx"] + ports["fabric_ports"]["pfc_xoff_tx"]
    assert sent > 0, ports
    assert ports["host_nics"]["pfc_xoff_rx"] > 0, ports
    assert ports["host_nics"]["pfc_paused_us"] > 0, ports
    # Every pause sent by a port is received by the one at the other end.
    received = sum(group["pfc_xoff_rx"] for group in ports.values())
    assert received == sent + ports["host_nics"]["pfc_xoff_tx"], ports


def test_every_pause_ends_with_its_queue(twin_network, incast):
    # After the runs every queue has drained: no port is left paused, in the program's
    # model nor at a NIC nor at a switch port (a resume lost or overtaken would hold its
    # sender, or a switch's lossless queue, for ever).
    assert ebpf_switch.paused_ports(twin_network) == set()
    pfc = twin_network.pfc
    assert pfc.paused == set() and pfc.held == set() and pfc.errors == []
    # The incast's pauses reached switch ports too, and were carried out there.
    assert pfc.switch_events > 0


def _lossless_leaf(node, intf: str) -> dict:
    """The tbf lossless leaf of a switch port, as `tc -s -j` shows it."""
    (leaf,) = [q for q in json.loads(node.cmd(f"tc -s -j qdisc show dev {intf}"))
               if q.get("kind") == "tbf"]
    return leaf


def test_a_paused_switch_port_sends_nothing_lossless_until_resumed(twin_network, incast):
    """A T1's port toward a T0 is paused (its gate shut, as a pause event shuts it) and
    given lossless frames: at most one frame's bytes leave while it is paused, the rest
    wait in its queue, and the resume lets all of them go at once, at the
    link's rate."""
    fabric, net = twin_network.fabric, twin_network.net
    t1 = next(s for s in fabric.switches if s.role == "t1")
    port = fabric.ports(t1.name)[0]
    node, peer = net.get(t1.name), net.get(port.peer)
    peer_intf = fabric.ports(port.peer)[port.peer_port].intf
    peer_mac = peer.cmd(f"cat /sys/class/net/{peer_intf}/address").strip()
    frames, size = 20, fabric.spec.data_frame_bytes
    dscp = fabric.spec.traffic_classes[protocol.ROCE]
    # IPv6/UDP from the unspecified address to the documentation prefix: the peer has
    # no route for it and, from ::, answers nothing.
    payload = size - protocol.WIRE_OVERHEAD
    ip6 = struct.pack("!IHBB", 6 << 28 | dscp << 22, 8 + payload, 17, 64) + bytes(16) \
        + socket.inet_pton(socket.AF_INET6, "2001:db8::1")
    frame = (bytes.fromhex(peer_mac.replace(":", "")) + bytes(6) + b"\x86\xdd" + ip6
             + struct.pack("!HHHH", 9, 9, 8 + payload, 0) + bytes(payload))
    raw = netns.socket_in(node.pid, socket.AF_PACKET, socket.SOCK_RAW)
    gates = twin_network.pfc.gates
    before = _lossless_leaf(node, port.intf)["packets"]
    gates.shut((t1.name, port.intf), True)
    try:
        for _ in range(frames):
            raw.sendto(frame, (port.intf, 0x86DD))
        time.sleep(0.5)  # many frame times at the link's rate
        paused = _lossless_leaf(node, port.intf)
    finally:
        resumed_at = time.monotonic()
        gates.shut((t1.name, port.intf), False)
        raw.close()
    assert paused["packets"] - before <= 1 and paused["qlen"] >= frames - 1, paused
    # Let go, the queue drains at the link's rate: 20 frames in well under a second.
    line_s = frames * size * 8 / (fabric.link_params(port.tier).rate_mbit * 1e6)
    while _lossless_leaf(node, port.intf)["qlen"] and time.monotonic() - resumed_at < 5:
        time.sleep(0.01)
    drained_s = time.monotonic() - resumed_at
    after = _lossless_leaf(node, port.intf)
    assert after["qlen"] == 0 and after["packets"] - before == frames, after
    assert drained_s < line_s + 0.2, (drained_s, line_s)


def test_dcqcn_cuts_the_rate_on_the_last_hops_marks(incast):
    # The lossless class is marked on a port facing a host too: DCQCN's receiver
    # answers the marks with CNPs and the senders cut their rate.
    block, ports = incast["roce-8"]
    assert ports["host_ports"]["ecn_marked"] > 0, ports
    assert block["path_events"].get("rate-cut", 0) > 0, block["path_events"]
    pfc_only = incast["roce-8-pfc"][0]
    assert pfc_only["path_events"].get("rate-cut", 0) == 0


def test_the_receiving_t0_s_queue_is_sampled_through_the_run(twin_network, incast):
    block, ports = incast["roce-8-pfc"]
    queue = block["queue"]
    samples = [s for s in queue["samples"] if 0 <= s[0] <= block["workload_s"]]
    # A sample every SAMPLE_S or so (the thread shares two cores with the run).
    assert len(samples) >= 0.5 * block["workload_s"] / SAMPLE_S, queue
    frame = twin_network.fabric.spec.data_frame_bytes
    # Three senders into one port: its lossless queue builds to several frames, and the
    # T0 is seen pausing a sender in some samples, as its counters say it did.
    assert max(s[1] for s in samples) >= 3 * frame, samples
    assert ports["host_ports"]["pfc_xoff_tx"] + ports["fabric_ports"]["pfc_xoff_tx"] > 0
    assert any(s[2] > 0 for s in samples), samples
    # After the run the queue has drained and nothing pauses.
    assert queue["samples"][-1][1] == 0 and queue["samples"][-1][2] == 0, queue["samples"][-5:]

