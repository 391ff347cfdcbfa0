"""PFC on the kernel data plane: a RoCE incast on a single-plane fabric loses nothing.

The single-plane twin of 2tier-2plane (experiments/dataplanes/twin.py: 4 hosts, 2 racks, 2 T1s)
is brought up as a run brings up the RoCE baseline's fabric, with the eBPF switch
program on every port and the pauses it decides carried out (experiments/dataplanes/pfc.py). Every
other host sends 1 MB to h0 at once with `roce-8-pfc` (PFC alone: without DCQCN
nothing slows the senders before the last hop's queue passes XOFF), and then with
`roce-8` (PFC and DCQCN). The lossless class must lose no packet anywhere; the pauses
are counted where they are sent and where they are received, back to the senders'
NICs, and each port's paused time is read. The receiving T0's queue to h0 is sampled
through each run (experiments/dataplanes/queue_sampler.py) as make paper's Fig. 22 rows
sample it.
The twin's links are capped at RATE_CAP_MBIT: three senders at the uncapped 40 Mbit/s
offer 120 Mbit/s to agents and switches on two cores, more than a 2-core machine
emulates (make calibrate: 40-56 Mbit/s per core), and a machine that falls behind loses
packets outside the emulated queues, where no pause can hold them.
Skipped with the reason where the program cannot run (clang, bpftool, cls_bpf).
"""

from __future__ import annotations

import pytest

from experiments.analysis.metrics import read_events, summarize
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.queue_sampler import SAMPLE_S, QueueSampler
from experiments.dataplanes.switch_counters import counter_totals
from experiments.dataplanes.targets import KernelTarget, apply_fault
from experiments.dataplanes.twin import twin_of
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
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
    # model nor at a NIC (a resume lost or overtaken would hold its sender for ever).
    assert ebpf_switch.paused_ports(twin_network) == set()
    assert twin_network.pfc.paused == set() and twin_network.pfc.errors == []


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

