"""One behaviour, two data planes: the same packets through a kernel switch and a BMv2 one.

Both switches are T0 `p0t0r0` of 2tier-2plane (port 0 -> h0, 1 -> h1, 2 -> T1 p0t1s0,
3 -> T1 p0t1s1), programmed from the same `controller.tables` entries:
- BMv2: the P4 program on simple_switch_grpc, the `switch` fixture of
  tests/p4/conftest.py (test-side veths `mrcp4-t<N>`);
- kernel: a network namespace set up as the testbed sets up a KernelRouter (its
  sysctls, `router_setup_commands`, `switch_commands`), with the eBPF switch program,
  its htb classes, its traffic classes and its per-port settings (`port_config`) on
  every port, as experiments/dataplanes/ebpf_switch.py `load_fabric` loads them (pinned under a
  folder of this test's own). Its ports carry the testbed's names and MACs
  (`p0t0r0-eth<N>`); their peers `mrcdk-t<N>` are in the root namespace.

Frames built with scapy (the MRC layer of hosts/mrc_scapy.py) go into the same port of
each switch through packet sockets; every MRC frame that leaves any port is captured.
Each frame's class is its DSCP (the topology's default code points), whatever its
payload says: the switches read no further than UDP.
What comes out is compared byte for byte, Ethernet header included: nothing is allowed
to differ. Only frames the kernel originates itself (ICMPv6 errors for a dropped
packet, MLD) are left out: they are not MRC frames and BMv2 sends none.

Under congestion the two queues are not the same machine (BMv2 drains its queue while
the burst is still arriving; the kernel's eBPF program decides on a virtual queue, see
docs/ebpf-switch.md), so the threshold is crossed within a few packets of the same
place on each; every packet that both treat alike (whole, marked, trimmed) must be
byte-identical, and each behaviour must happen on both.

Skipped with the reason without BMv2, p4c, root (tests/p4/conftest.py), clang or
bpftool, or a kernel that will not load the eBPF program.
"""

from __future__ import annotations

import copy
import errno
import os
import shutil
import socket
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller import ebpf_config as cfg
from controller.kernel import router_setup_commands, switch_commands
from hosts import protocol
from hosts.mrc_scapy import MRC, MRCControl
from tests.netns import holder
from topologies.addressing import intf_name, mac_address
from topologies.ebpf_program import EbpfProgram, build, ebpf_available
from topologies.model import LinkParams

# The switch of the `switch` fixture (tests/p4/conftest.py), checked by `kernel`.
SWITCH, PORTS = "p0t0r0", 4
NS = f"mrcdk-{os.getpid()}"
PIN = Path(f"/sys/fs/bpf/mrc-testbed-differential-{os.getpid()}")
ETH_P_ALL = 0x0003
SWITCH_MAC = [mac_address(SWITCH, p) for p in range(PORTS)]
PEER_MAC = [mac_address("h0", 0), mac_address("h1", 0), mac_address("p0t1s0", 0),
            mac_address("p0t1s1", 0)]
H0 = "fcbb:bb00:8000::"
UP_TO_S1 = "fcbb:bb00:1000:2001:1001:8003::"  # h0 -> h3 through T1 spine 1 (port 3)
DOWN_TO_H1 = "fcbb:bb00:1000:8001::"  # last hop to h1 (port 1)
ECT0, CE = protocol.ECN_ECT0, protocol.ECN_CE
DSCP = protocol.DEFAULT_DSCP
# A congested port: 10 full frames a second. BMv2 takes a burst in at its own pace
# (over 100 ms for 120 frames on a loaded 2-core machine) while its port already
# sends; the kernel takes it in within milliseconds. What the port sends during that
# time lets later frames of BMv2's burst find room that the kernel's did not: at 100
# frames a second that was 10 frames, at 10 it stays within THRESHOLD_SLACK.
SLOW_PPS = 10
# Bursts are of full frames: BMv2 counts its queue in packets, the eBPF program in
# bytes of full frames, and the two agree only on those.
SLOW_MBIT = protocol.link_mbit(SLOW_PPS, protocol.DATA_FRAME_BYTES)
# The testbed's queue settings of the topology (2tier-2plane: 64 packets).
QUEUE_PKTS = 64
# How many packets apart the two switches may cross a threshold (see the docstring).
THRESHOLD_SLACK = 4


def frame(dst: str, in_port: int = 0, ecn: int = 0, psn: int = 0, payload: bytes = b"x" * 100,
          cls: int = protocol.TRIMMABLE, hop_limit: int = 64):
    """A DATA packet of traffic class `cls` (its default DSCP)."""
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src=H0, dst=dst, hlim=hop_limit, tc=protocol.traffic_class(DSCP[cls], ecn))
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.DATA, conn_id=3, ev=0x00010001, psn=psn, msg_len=100_000)
            / payload)


def full(psn: int) -> bytes:
    """The payload of a full DATA frame, different for each packet."""
    return bytes([psn % 256]) * protocol.DEFAULT_MTU_PAYLOAD


def sack(dst: str, in_port: int = 0):
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src=H0, dst=dst, tc=protocol.traffic_class(DSCP[protocol.CONTROL], ECT0))
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.SACK, conn_id=3, ev=0x00010001) / MRCControl(cum_psn=7))


# ---------------------------------------------------------------------- the two sides
def packet_sockets(names: list[str]) -> list[socket.socket]:
    socks = []
    for name in names:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.bind((name, 0))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        sock.setblocking(False)
        socks.append(sock)
    return socks


def is_mrc(pkt) -> bool:
    """An MRC frame itself, not an ICMPv6 error quoting one."""
    return (IPv6 in pkt and isinstance(pkt[IPv6].payload, UDP)
            and pkt[UDP].dport == protocol.MRC_UDP_PORT)


@dataclass
class Side:
    """One switch seen from its links: a packet socket on the far end of every port."""

    name: str
    socks: list[socket.socket]

    def drain(self) -> None:
        for sock in self.socks:
            while True:
                try:
                    sock.recv(65535)
                except BlockingIOError:
                    break

    def send(self, port: int, packets) -> None:
        # Built before the first is sent: scapy takes milliseconds a packet, and a
        # burst must reach the switch as one.
        for raw in [bytes(p) for p in packets]:
            try:
                self.socks[port].send(raw)
            except OSError as err:
                if err.errno != errno.ENOBUFS:
                    raise

    def poll(self, out: dict[int, list[bytes]]) -> bool:
        """Append every MRC frame waiting on each port to out[port]; whether any was."""
        found = False
        for port, sock in enumerate(self.socks):
            while True:
                try:
                    raw, address = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                found = True
                if address[2] == socket.PACKET_OUTGOING:
                    continue  # what this test sent, seen on its own socket
                if is_mrc(Ether(raw)):
                    out[port].append(raw)
        return found


def _sh(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")


def ns_run(command: str) -> str:
    """A shell command in the kernel switch's namespace (what Mininet's node.cmd does)."""
    return subprocess.run(["ip", "netns", "exec", NS, "sh", "-c", command],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout


class KernelSwitch:
    """T0 p0t0r0 as the kernel data plane runs it, in namespace NS."""

    def __init__(self, fabric, tables, stack: ExitStack):
        from topologies.nodes import _SYSCTLS, KernelRouter, run_commands

        self.fabric, self.tables = fabric, tables
        self.program: EbpfProgram | None = None
        self.ifindex: dict[int, int] = {}
        _sh(["ip", "netns", "add", NS])
        self.pid = stack.enter_context(holder(NS))
        run_commands(["sysctl -qw " + " ".join(_SYSCTLS + KernelRouter.extra_sysctls)],
                     ns_run, NS)
        for port in range(PORTS):
            inside, outside = intf_name(SWITCH, port), f"mrcdk-t{port}"
            subprocess.run(["ip", "link", "del", outside], capture_output=True)
            _sh(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside,
                 "netns", NS])
            _sh(["sysctl", "-qw", f"net.ipv6.conf.{outside}.disable_ipv6=1"])
            _sh(["ip", "link", "set", outside, "up"])
            run_commands([f"ip link set {inside} address {SWITCH_MAC[port]}",
                          f"ip link set {inside} up"], ns_run, NS)
            self.ifindex[port] = int(ns_run(f"cat /sys/class/net/{inside}/ifindex"))
        run_commands(router_setup_commands() + switch_commands(tables), ns_run, NS)

    def load_program(self) -> None:
        self.program = EbpfProgram(cfg.OBJECT, PIN)
        self.program.load()
        qdiscs = []
        for port in self.fabric.ports(SWITCH):
            qdiscs += cfg.qdisc_commands(port.intf, self.fabric.link_params(port.tier))
        self.program.attach(self.pid, [p.intf for p in self.fabric.ports(SWITCH)], qdiscs)
        self.program.write(cfg.class_writes(self.tables))
        self.restore()

    def set_link(self, port: int, link: LinkParams) -> None:
        """The port's htb classes and program settings for a link like `link`, its
        virtual queues emptied and its counters zero."""
        (role,) = [r for r in self.tables.ports if r.port == port]
        intf = intf_name(SWITCH, port)
        # htb cannot change its size table in place: the classes are made anew.
        ns_run(f"tc qdisc del dev {intf} root")
        done = subprocess.run(["ip", "netns", "exec", NS, "tc", "-batch", "-"],
                              input="\n".join(cfg.qdisc_commands(intf, link)) + "\n",
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        ifindex = self.ifindex[port]
        self.program.write([cfg.port_config(self.tables, role, link).write(ifindex),
                            *cfg.fresh_state_writes(ifindex, self.program.sizes)])

    def counters(self) -> dict[int, dict[str, int]]:
        """Each port's counters: port -> name -> packets."""
        port_of = {ifindex: port for port, ifindex in self.ifindex.items()}
        return {port_of[cfg.U32.unpack(k)[0]]: cfg.decode_counters(v)
                for k, v in self.program.dump(cfg.COUNTERS_MAP)
                if cfg.U32.unpack(k)[0] in port_of}

    def restore(self) -> None:
        for port in self.fabric.ports(SWITCH):
            self.set_link(port.number, self.fabric.link_params(port.tier))

    @staticmethod
    def remove() -> None:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
        for port in range(PORTS):
            subprocess.run(["ip", "link", "del", f"mrcdk-t{port}"], capture_output=True)
        shutil.rmtree(PIN, ignore_errors=True)


@pytest.fixture(scope="module")
def kernel(switch):
    command = cfg.compile_command()
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} not found: the eBPF switch needs clang and libbpf-dev")
    if shutil.which("bpftool") is None:
        pytest.skip("bpftool not found: the eBPF switch's maps are written with it")
    build(command, cfg.OBJECT, cfg.BUILD_INPUTS)
    assert (switch["tables"].switch, len(switch["tables"].ports)) == (SWITCH, PORTS)
    KernelSwitch.remove()  # what a run killed with -9 left
    stack = ExitStack()
    try:
        node = KernelSwitch(switch["fabric"], switch["tables"], stack)
        available, reason = ebpf_available(cfg.OBJECT, node.pid, PIN)
        if not available:
            pytest.skip(reason)
        node.load_program()
        yield node
    finally:
        stack.close()
        KernelSwitch.remove()


@pytest.fixture(scope="module")
def sides(switch, kernel):
    bmv2_socks = packet_sockets([f"mrcp4-t{p}" for p in range(PORTS)])
    kernel_socks = packet_sockets([f"mrcdk-t{p}" for p in range(PORTS)])
    try:
        yield Side("bmv2", bmv2_socks), Side("kernel", kernel_socks)
    finally:
        for sock in bmv2_socks + kernel_socks:
            sock.close()


@pytest.fixture
def planes(sides, kernel, test):
    """Both switches with empty queues, at the topology's rates (kernel) or unlimited
    (BMv2, as the `test` fixture of tests/p4/conftest.py leaves it after each test),
    and a `slow(port)` that makes that port of each a SLOW_MBIT link."""
    bmv2, kern = sides

    def slow(port: int) -> None:
        test.slow(port, SLOW_PPS, QUEUE_PKTS)
        kernel.set_link(port, LinkParams(SLOW_MBIT, 0.0, QUEUE_PKTS))

    for side in sides:
        side.drain()
    try:
        yield bmv2, kern, slow
    finally:
        kernel.restore()


def through_both(planes, in_port: int, packets, seconds: float = 1.0):
    """What each switch sent on each port within `seconds`, for the same packets into
    `in_port` of each (one switch right after the other, then both read together)."""
    bmv2, kern, _ = planes
    bmv2.send(in_port, packets)
    kern.send(in_port, packets)
    got_bmv2 = {p: [] for p in range(PORTS)}
    got_kernel = {p: [] for p in range(PORTS)}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not (bmv2.poll(got_bmv2) | kern.poll(got_kernel)):
            time.sleep(0.002)
    return got_bmv2, got_kernel


def by_psn(frames: list[bytes]) -> dict[int, bytes]:
    return {Ether(raw)[MRC].psn: raw for raw in frames}


# ---------------------------------------------------------------------- forwarding
@pytest.mark.parametrize("dst,in_port,out_port", [
    (UP_TO_S1, 0, 3),  # uSID shift, up to a T1
    ("fcbb:bb00:1000:2000:1001:8003::", 0, 2),  # the other spine
    (DOWN_TO_H1, 2, 1),  # last hop from a T1 to a host
    (DOWN_TO_H1, 0, 1),  # same rack, down from the T0
], ids=["shift-up", "other-spine", "last-hop", "same-rack"])
def test_shift_and_forward_is_identical(planes, dst, in_port, out_port):
    pkt = frame(dst, in_port=in_port, ecn=ECT0)
    got_bmv2, got_kernel = through_both(planes, in_port, [pkt])
    assert len(got_bmv2[out_port]) == 1, got_bmv2
    assert got_kernel == got_bmv2
    out = Ether(got_bmv2[out_port][0])
    assert out[IPv6].hlim == 63 and out[Ether].src == SWITCH_MAC[out_port]


@pytest.mark.parametrize("pkt", [
    frame("fcbb:bb00:1001:8001::"),  # not mine: a T0 of rack 1
    frame("fcbb:bb00:1000:9999::"),  # mine, then no route
    frame("fcbb:bb01:1000:8001::"),  # another block
    frame(DOWN_TO_H1, hop_limit=1),  # hop limit
], ids=["not-mine", "no-route", "other-block", "hop-limit"])
def test_dropped_by_both(planes, pkt):
    got_bmv2, got_kernel = through_both(planes, 0, [pkt], seconds=0.5)
    assert got_bmv2 == got_kernel == {p: [] for p in range(PORTS)}


# ---------------------------------------------------------------------- congestion
def burst_through_both(planes, out_port: int, packets):
    """What each switch sent on `out_port` made slow, within the time the slow port
    takes to send the whole burst and 3 s more."""
    bmv2, kern, slow = planes
    seconds = len(packets) / SLOW_PPS + 3.0
    slow(out_port)
    in_port = 2 if out_port < 2 else 0
    got_bmv2, got_kernel = through_both(planes, in_port, packets, seconds)
    return got_bmv2[out_port], got_kernel[out_port]


def test_ecn_mark_on_a_fabric_port(planes):
    burst = [frame(UP_TO_S1, ecn=ECT0, psn=i, payload=full(i)) for i in range(40)]
    out_bmv2, out_kernel = burst_through_both(planes, 3, burst)
    marks = {}
    for name, out in (("bmv2", out_bmv2), ("kernel", out_kernel)):
        psns = [Ether(raw)[MRC].psn for raw in out]
        assert psns == list(range(40)), (name, psns)
        marks[name] = {Ether(raw)[MRC].psn for raw in out
                       if Ether(raw)[IPv6].tc & protocol.ECN_MASK == CE}
        assert marks[name] and min(marks[name]) >= 8, (name, sorted(marks[name]))
    assert len(marks["bmv2"] ^ marks["kernel"]) <= THRESHOLD_SLACK, marks
    # Whatever both marked, or both left alone, left both switches as the same bytes.
    assert out_bmv2 == out_kernel or all(
        out_bmv2[i] == out_kernel[i] for i in range(40)
        if (i in marks["bmv2"]) == (i in marks["kernel"]))


@pytest.mark.parametrize("depth", [8, 20, 28])
def test_marking_decisions_agree_over_a_queue_depth_sweep(planes, switch, depth):
    """Bursts that build the queue of a fabric port to `depth` packets, below and above
    the marking threshold (this module's fabric marks in a step at Kmin = Kmax): both
    switches leave a shallow queue unmarked and mark the same packets of a deep one,
    within the slack of when each counts a packet in its queue."""
    kmin = switch["fabric"].spec.ecn_threshold_pkts
    burst = [frame(UP_TO_S1, ecn=ECT0, psn=i, payload=full(i)) for i in range(depth)]
    out_bmv2, out_kernel = burst_through_both(planes, 3, burst)
    marks = {}
    for name, out in (("bmv2", out_bmv2), ("kernel", out_kernel)):
        assert sorted(by_psn(out)) == list(range(depth)), name
        marks[name] = {Ether(raw)[MRC].psn for raw in out
                       if Ether(raw)[IPv6].tc & protocol.ECN_MASK == CE}
        if depth < kmin - THRESHOLD_SLACK:
            assert not marks[name], (name, sorted(marks[name]))
        else:
            assert marks[name] and min(marks[name]) >= kmin - THRESHOLD_SLACK, (
                name, sorted(marks[name]))
    assert len(marks["bmv2"] ^ marks["kernel"]) <= THRESHOLD_SLACK, marks


def test_never_marked_on_the_last_hop(planes):
    burst = [frame(DOWN_TO_H1, in_port=2, ecn=ECT0, psn=i, payload=full(i))
             for i in range(40)]
    out_bmv2, out_kernel = burst_through_both(planes, 1, burst)
    assert len(out_bmv2) == 40 and out_bmv2 == out_kernel
    assert all(Ether(raw)[IPv6].tc & protocol.ECN_MASK == ECT0 for raw in out_bmv2)


def dscp_of(raw: bytes) -> int:
    return Ether(raw)[IPv6].tc >> 2


def trimmed_of(out: list[bytes]) -> dict[int, bytes]:
    """The trimmed packets of `out`: those a switch gave a trimmed class's DSCP."""
    cut = (DSCP[protocol.TRIMMED], DSCP[protocol.TRIMMED_LASTHOP])
    return {psn: raw for psn, raw in by_psn(out).items() if dscp_of(raw) in cut}


@pytest.mark.parametrize("out_port", [3, 1], ids=["fabric-port", "last-hop"])
def test_trimmed_header_is_identical(planes, kernel, switch, out_port):
    dst = UP_TO_S1 if out_port == 3 else DOWN_TO_H1
    in_port = 0 if out_port == 3 else 2
    burst = [frame(dst, in_port=in_port, payload=full(i), psn=i) for i in range(120)]
    sent = by_psn([bytes(p) for p in burst])
    before = read_p4_counters(switch)
    out_bmv2, out_kernel = burst_through_both(planes, out_port, burst)
    cut = {}
    for name, out in (("bmv2", out_bmv2), ("kernel", out_kernel)):
        assert sorted(by_psn(out)) == list(range(120)), name  # each whole or trimmed
        cut[name] = trimmed_of(out)
        assert len(cut[name]) >= 40, (name, len(cut[name]))
        for psn, raw in cut[name].items():
            assert len(raw) == protocol.TRIMMED_FRAME_BYTES
            # The switch wrote nothing behind the UDP header.
            end = protocol.WIRE_OVERHEAD
            assert raw[end:] == sent[psn][end:protocol.TRIMMED_FRAME_BYTES], (name, psn)
    assert len(set(cut["bmv2"]) ^ set(cut["kernel"])) <= THRESHOLD_SLACK
    both = set(cut["bmv2"]) & set(cut["kernel"])
    assert {p: cut["bmv2"][p] for p in both} == {p: cut["kernel"][p] for p in both}
    # Asymmetric DSCP: TRIMMED_LASTHOP facing a host, TRIMMED on a fabric port.
    expected = protocol.TRIMMED_LASTHOP if out_port == 1 else protocol.TRIMMED
    for name in cut:
        assert {dscp_of(raw) for raw in cut[name].values()} == {DSCP[expected]}, name
    whole_bmv2, whole_kernel = by_psn(out_bmv2), by_psn(out_kernel)
    for psn in range(120):
        if psn not in cut["bmv2"] and psn not in cut["kernel"]:
            assert whole_bmv2[psn] == whole_kernel[psn], psn
    # Both count under SONiC's names what they did.
    p4 = counted_since(before, read_p4_counters(switch), out_port)
    ebpf = kernel.counters()[out_port]
    for name, counts in (("bmv2", p4), ("kernel", ebpf)):
        assert counts["trim_pkts"] == counts["tx_trim_pkts"] == len(cut[name]), name
        assert counts["dropped_trim_pkts"] == 0, name


@pytest.mark.parametrize("cls", [protocol.NO_TRIM, protocol.ROCE], ids=["no-trim", "roce"])
def test_untrimmable_data_is_never_trimmed(planes, kernel, switch, cls):
    # NO_TRIM overflows the data queue and is dropped; the lossless class is never
    # dropped: its queue is deep and PFC (counted here: the ports' peers are not
    # switches) pauses its sender first.
    burst = [frame(UP_TO_S1, payload=full(i), psn=i, cls=cls) for i in range(120)]
    before = read_p4_counters(switch)
    out_bmv2, out_kernel = burst_through_both(planes, 3, burst)
    for name, out in (("bmv2", out_bmv2), ("kernel", out_kernel)):
        assert not trimmed_of(out), name
        if cls == protocol.ROCE:
            assert len(out) == 120, (name, len(out))
        else:
            assert out and len(out) < 120, (name, len(out))  # the queue overflowed
    got_bmv2, got_kernel = by_psn(out_bmv2), by_psn(out_kernel)
    assert abs(len(got_bmv2) - len(got_kernel)) <= THRESHOLD_SLACK
    both = set(got_bmv2) & set(got_kernel)
    assert {p: got_bmv2[p] for p in both} == {p: got_kernel[p] for p in both}
    p4 = counted_since(before, read_p4_counters(switch), 3)
    ebpf = kernel.counters()[3]
    for name, counts, out in (("bmv2", p4, out_bmv2), ("kernel", ebpf, out_kernel)):
        assert counts["trim_pkts"] == 0, name
        assert counts["dropped"] == 120 - len(out), name
    if cls == protocol.ROCE:
        # The ingress port (0) sent its peer a pause on both.
        p4_in = counted_since(before, read_p4_counters(switch), 0)
        assert p4_in["pfc_xoff_tx"] >= 1 and kernel.counters()[0]["pfc_xoff_tx"] >= 1


def test_priority_class_overtakes_queued_data_whatever_its_payload(planes):
    # A SACK, and a packet that carries a full DATA packet behind UDP but the CONTROL
    # DSCP: both take the priority queue, neither is trimmed.
    burst = [frame(UP_TO_S1, payload=full(0), psn=i) for i in range(100)]
    answer = sack(UP_TO_S1)
    disguised = frame(UP_TO_S1, payload=full(1), psn=500, cls=protocol.CONTROL)
    out_bmv2, out_kernel = burst_through_both(planes, 3, [*burst, answer, disguised])
    for name, out in (("bmv2", out_bmv2), ("kernel", out_kernel)):
        early = [i for i, raw in enumerate(out) if dscp_of(raw) == DSCP[protocol.CONTROL]]
        assert len(early) == 2, name
        assert max(early) < QUEUE_PKTS, (name, early)  # ahead of the data still queued
        assert [len(out[i]) for i in early] == [len(bytes(answer)), len(bytes(disguised))]
    control = [[raw for raw in out if dscp_of(raw) == DSCP[protocol.CONTROL]]
               for out in (out_bmv2, out_kernel)]
    assert control[0] == control[1]
    expected = copy.deepcopy(answer)
    expected[Ether].src, expected[Ether].dst = SWITCH_MAC[3], PEER_MAC[3]
    expected[IPv6].dst, expected[IPv6].hlim = "fcbb:bb00:2001:1001:8003::", 63
    assert control[0][0] == bytes(expected)


def read_p4_counters(switch) -> dict[str, dict[int, int]]:
    from controller.program import read_counters

    return read_counters(switch["grpc"], 1, switch["p4info"])


def counted_since(before, after, port: int) -> dict[str, int]:
    return {name: after[name].get(port, 0) - before[name].get(port, 0) for name in after}
