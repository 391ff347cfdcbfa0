"""The eBPF switch program on a real port: classes by DSCP, trimming, drops, ECN, priority,
faults, counters.

No Mininet: one network namespace with one veth pair. The program, loaded and pinned
as a fabric loads it (topologies/ebpf_program.py, under a pin folder of this test's
own), runs on the egress of `ebpft0`; packets built with scapy are sent into `ebpft0`
through a packet socket and captured as they arrive on `ebpft1`. The port drains its
virtual queues at 1 byte/s, so they hold exactly the bytes sent so far and every
threshold is crossed at a known packet; the expected packets are built field by field
and compared byte for byte. The switch decides by the DSCP alone, so every test sets
the class by the DSCP, whatever the payload says. Root is needed
(tests/integration/conftest.py skips without it); clang, libbpf-dev and bpftool too
(skipped with the reason otherwise).
"""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import socket
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller import ebpf_config as cfg
from controller.tables import PROBABILITY_ONE, WEYL_STEP, all_tables
from hosts import protocol
from hosts.mrc_scapy import MRC, MRCControl
from tests.netns import holder, in_namespace
from topologies.ebpf_program import EbpfProgram, build, ebpf_available
from topologies.model import LinkParams, load_topology

NS = f"ebpft-{os.getpid()}"
PIN = Path(f"/sys/fs/bpf/mrc-testbed-test-{os.getpid()}")
TX, RX = "ebpft0", "ebpft1"
ETH_P_ALL = 0x0003
FRAME = protocol.DATA_FRAME_BYTES
PAYLOAD = protocol.DEFAULT_MTU_PAYLOAD
DSCP = protocol.DEFAULT_DSCP
UDP_END = protocol.WIRE_OVERHEAD  # where the bytes a switch never writes begin
PATH_A = "fcbb:bb00:2001:1001:8003::"
PATH_B = "fcbb:bb00:2000:1001:8003::"


def tc(cls: int, ecn: int = protocol.ECN_ECT0) -> int:
    """The IPv6 traffic class of a class's default DSCP."""
    return protocol.traffic_class(DSCP[cls], ecn)


def run(command: str) -> str:
    """Run a shell command in the test namespace."""
    done = subprocess.run(["ip", "netns", "exec", NS, "sh", "-c", command],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.stdout


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture(scope="module")
def obj() -> Path:
    command = cfg.compile_command()
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} not found: the eBPF switch needs clang and libbpf-dev")
    build(command, cfg.OBJECT, cfg.BUILD_INPUTS)  # a program that does not compile fails
    return cfg.OBJECT


@pytest.fixture(scope="module")
def namespace(obj):
    """The namespace, its veth pair (IPv6 off, so the kernel sends nothing of its own)
    and a process in it whose pid names it; deleted afterwards, even on failure."""
    stack = ExitStack()
    try:
        sh("ip", "netns", "add", NS)
        run("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        run(f"ip link add {TX} type veth peer name {RX}; ip link set {TX} up; "
            f"ip link set {RX} up")
        pid = stack.enter_context(holder(NS))
        available, reason = ebpf_available(obj, pid, PIN)
        if not available:
            pytest.skip(reason)
        yield pid
    finally:
        stack.close()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
        shutil.rmtree(PIN, ignore_errors=True)
    assert NS not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout


@pytest.fixture(scope="module")
def sockets(namespace):
    with in_namespace(NS):
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    tx.bind((TX, 0))
    rx.bind((RX, 0))
    rx.settimeout(0.3)
    yield tx, rx
    tx.close()
    rx.close()


class Port:
    """The program on TX, its maps of that port."""

    def __init__(self, program: EbpfProgram, ifindex: int):
        self.program, self.ifindex = program, ifindex

    def configure(self, **settings) -> None:
        """A switch port draining at 1 byte/s with `settings` (PortConfig fields), its
        queues empty and its counters zero."""
        config = cfg.PortConfig(1, mode=cfg.MODE_SWITCH, **settings)
        self.program.write([config.write(self.ifindex),
                            *cfg.fresh_state_writes(self.ifindex, self.program.sizes)])

    def empty_queues(self) -> None:
        self.program.write(cfg.fresh_state_writes(self.ifindex, self.program.sizes)[:1])

    def counters(self) -> dict[str, int]:
        for key, value in self.program.dump(cfg.COUNTERS_MAP):
            if cfg.U32.unpack(key)[0] == self.ifindex:
                return cfg.decode_counters(value)
        return {}


@pytest.fixture(scope="module")
def loaded(namespace, obj):
    """The program loaded once and attached to TX, the default traffic classes written."""
    program = EbpfProgram(obj, PIN)
    program.load()
    program.attach(namespace, [TX])
    tables = all_tables(load_topology("2tier-2plane"))["p0t0r0"]
    program.write(cfg.class_writes(tables))
    yield Port(program, int(run(f"cat /sys/class/net/{TX}/ifindex")))
    run(f"tc qdisc del dev {TX} clsact")
    program.unload()


@pytest.fixture
def port(loaded):
    yield loaded
    run(f"tc qdisc del dev {TX} root 2>/dev/null")
    loaded.program.write([cfg.loss_write(loaded.ifindex, 0.0)])


def mrc(cls: int, psn: int, kind: int = protocol.DATA, dst: str = PATH_A,
        ecn: int = protocol.ECN_ECT0, payload: bytes | None = None):
    """An MRC packet of class `cls` (its DSCP): a DATA packet with a full payload, or a
    SACK."""
    head = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IPv6(src="fcbb:bb00:8000::", dst=dst, tc=tc(cls, ecn), hlim=63)
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0))
    if kind == protocol.SACK:
        return head / MRC(type=kind, conn_id=3, ev=0x00010001, psn=psn) / MRCControl(cum_psn=psn)
    body = payload if payload is not None else bytes([psn % 256]) * PAYLOAD
    return head / MRC(type=kind, conn_id=3, ev=0x00010001, psn=psn, msg_len=100_000) / body


def data(psn: int, cls: int = protocol.TRIMMABLE, **kwargs):
    return mrc(cls, psn, **kwargs)


def exchange(sockets, packets) -> list:
    """Send the packets into the port; every MRC packet that comes out, in order."""
    tx, rx = sockets
    # Built before the first is sent: scapy takes milliseconds a packet, and a burst
    # must reach the port as one.
    for frame in [bytes(pkt) for pkt in packets]:
        try:
            tx.send(frame)
        except OSError as err:
            # A packet the program drops fails the send (NET_XMIT_DROP): expected.
            if err.errno != errno.ENOBUFS:
                raise
    got = []
    while True:
        try:
            frame = rx.recv(65535)
        except TimeoutError:
            return got
        pkt = Ether(frame)
        if pkt.haslayer(UDP) and pkt[UDP].dport == protocol.MRC_UDP_PORT:
            got.append(pkt)


def psn_of(pkt) -> int:
    """The PSN of a packet that came out, trimmed or not (its MRC header is whole)."""
    return MRC(bytes(pkt[UDP].payload)[:protocol.MRC_HEADER_BYTES]).psn


def trimmed(pkt, dscp: int, size: int = protocol.TRIMMED_FRAME_BYTES) -> bytes:
    """What a switch makes of a trimmed packet: its first `size` bytes, the DSCP
    rewritten (ECN kept), the IPv6 payload length and the UDP length fixed; nothing
    behind the UDP header written."""
    out = copy.deepcopy(pkt)
    out[IPv6].tc = protocol.traffic_class(dscp, pkt[IPv6].tc & protocol.ECN_MASK)
    out[IPv6].plen = out[UDP].len = size - protocol.ETHERNET_HEADER_BYTES \
        - protocol.IPV6_HEADER_BYTES
    return bytes(out)[:size]


# ---------------------------------------------------------------------- the object
def test_map_layouts_match_the_program(obj):
    """controller/ebpf_config.py encodes the structs the compiled program declares."""
    types = json.loads(subprocess.run(["bpftool", "-j", "btf", "dump", "file", str(obj)],
                                      capture_output=True, text=True, check=True).stdout)
    structs = {t["name"]: t for t in types["types"] if t["kind"] == "STRUCT"}
    config = structs["port_config"]
    assert config["size"] == cfg.PORT_CONFIG.size
    offsets = {m["name"]: m["bits_offset"] // 8 for m in config["members"]}
    expected, at = {}, 0
    for name, code in zip(cfg.PORT_CONFIG_FIELDS, "Q" + "I" * 13 + "BBBB"):
        expected[name] = at
        at += {"Q": 8, "I": 4, "B": 1}[code]
    assert offsets == expected
    state = {m["name"]: m["bits_offset"] // 8 for m in structs["port_state"]["members"]}
    assert state["paused"] == cfg.STATE_PAUSED.size - 4
    assert state["paused_total_ns"] == cfg.STATE_PAUSED_TOTAL.size - 8
    assert [state[f] for f in ("priority_bytes", "lossless_bytes", "data_bytes", "last_ns")] \
        == [8, 16, 24, 32] and cfg.STATE_QUEUES.size == 40
    ingress = {m["name"]: m["bits_offset"] // 8
               for m in structs["ingress_state"]["members"]}
    assert (ingress["bytes"], ingress["xoff"]) == (0, 8) and cfg.INGRESS_STATE.size == 12
    assert structs["gray_key"]["size"] == cfg.GRAY_KEY.size
    assert structs["counters"]["size"] == 8 * len(cfg.COUNTERS)


# ---------------------------------------------------------------------- trimming
@pytest.mark.parametrize("trimmed_class", [protocol.TRIMMED, protocol.TRIMMED_LASTHOP])
def test_trimmed_as_sonic_trims_and_nothing_behind_udp_is_written(sockets, port,
                                                                  trimmed_class):
    # The controller gives a port facing a host TRIMMED_LASTHOP, a fabric port TRIMMED.
    port.configure(trim_threshold_bytes=3 * FRAME, dscp_trimmed=DSCP[trimmed_class],
                   host_facing=trimmed_class == protocol.TRIMMED_LASTHOP)
    sent = [data(psn) for psn in range(5)]
    out = exchange(sockets, sent)
    assert [psn_of(p) for p in out] == list(range(5))
    # Three full frames fill the queue to the threshold; the fourth and fifth are cut.
    assert [bytes(p) for p in out[:3]] == [bytes(p) for p in sent[:3]]
    for got, pkt in zip(out[3:], sent[3:]):
        assert bytes(got) == trimmed(pkt, DSCP[trimmed_class])
        assert len(bytes(got)) == protocol.TRIMMED_FRAME_BYTES
        assert bytes(got)[UDP_END:] == bytes(pkt)[UDP_END:protocol.TRIMMED_FRAME_BYTES]
    assert {k: v for k, v in port.counters().items() if v} == {
        "forwarded": 5, "trim_pkts": 2, "tx_trim_pkts": 2}


def test_a_configured_trim_size_keeps_that_many_bytes(sockets, port):
    port.configure(trim_threshold_bytes=FRAME, trim_size_bytes=200,
                   dscp_trimmed=DSCP[protocol.TRIMMED])
    sent = [data(0), data(1, cls=protocol.TRIMMABLE_RETX)]
    out = exchange(sockets, sent)
    assert bytes(out[0]) == bytes(sent[0])
    assert bytes(out[1]) == trimmed(sent[1], DSCP[protocol.TRIMMED], 200)


@pytest.mark.parametrize("cls", [protocol.NO_TRIM, None])
def test_untrimmable_data_is_dropped_at_the_queue_limit_never_trimmed(sockets, port, cls):
    # NO_TRIM, and a DSCP the topology does not name (best effort).
    port.configure(trim_threshold_bytes=2 * FRAME, drop_threshold_bytes=4 * FRAME,
                   dscp_trimmed=DSCP[protocol.TRIMMED])
    sent = [data(psn, cls=protocol.NO_TRIM) for psn in range(6)]
    if cls is None:
        for pkt in sent:
            pkt[IPv6].tc = protocol.traffic_class(33, protocol.ECN_ECT0)
    out = exchange(sockets, sent)
    # Whole up to the queue limit (the trim threshold does not apply), then dropped.
    assert [bytes(p) for p in out] == [bytes(p) for p in sent[:4]]
    assert {k: v for k, v in port.counters().items() if v} == {"forwarded": 4, "dropped": 2}


def test_the_lossless_class_is_never_trimmed_or_dropped(sockets, port):
    port.configure(trim_threshold_bytes=FRAME, drop_threshold_bytes=2 * FRAME,
                   dscp_trimmed=DSCP[protocol.TRIMMED])
    sent = [data(psn, cls=protocol.ROCE) for psn in range(6)]
    assert [bytes(p) for p in exchange(sockets, sent)] == [bytes(p) for p in sent]
    assert {k: v for k, v in port.counters().items() if v} == {"forwarded": 6}


def test_a_trimmed_header_that_finds_the_priority_queue_full_is_dropped(sockets, port):
    port.configure(trim_threshold_bytes=FRAME,
                   priority_limit_bytes=2 * protocol.TRIMMED_FRAME_BYTES,
                   dscp_trimmed=DSCP[protocol.TRIMMED])
    out = exchange(sockets, [data(psn) for psn in range(5)])
    assert [len(bytes(p)) for p in out] == [FRAME] + [protocol.TRIMMED_FRAME_BYTES] * 2
    assert {k: v for k, v in port.counters().items() if v} == {
        "forwarded": 3, "trim_pkts": 4, "tx_trim_pkts": 2, "dropped_trim_pkts": 2}


def test_a_control_class_packet_is_never_trimmed_whatever_its_payload(sockets, port):
    # The DSCP says CONTROL; behind UDP sits a full DATA packet. The switch reads no
    # further than UDP: it is a priority packet, never trimmed, never marked.
    port.configure(trim_threshold_bytes=FRAME, ecn_kmin_bytes=FRAME, ecn_kmax_bytes=FRAME,
                   dscp_trimmed=DSCP[protocol.TRIMMED])
    sent = [data(0)] + [data(psn, cls=protocol.CONTROL) for psn in range(1, 5)]
    assert [bytes(p) for p in exchange(sockets, sent)] == [bytes(p) for p in sent]
    assert {k: v for k, v in port.counters().items() if v} == {"forwarded": 5}


# ---------------------------------------------------------------------- ECN
def test_ecn_marked_on_a_fabric_port_at_the_threshold(sockets, port):
    port.configure(ecn_kmin_bytes=2 * FRAME, ecn_kmax_bytes=2 * FRAME)
    sent = [data(psn) for psn in range(4)] + [data(4, ecn=protocol.ECN_NOT_ECT)]
    out = exchange(sockets, sent)
    marks = [p[IPv6].tc & protocol.ECN_MASK for p in out]
    # Not-ECT (the last packet) is never marked.
    assert marks == [protocol.ECN_ECT0] * 2 + [protocol.ECN_CE] * 2 + [protocol.ECN_NOT_ECT]
    expected = copy.deepcopy(sent[3])
    expected[IPv6].tc = tc(protocol.TRIMMABLE, protocol.ECN_CE)
    assert bytes(out[3]) == bytes(expected)  # only the ECN bits changed
    assert port.counters()["ecn_marked"] == 2


def test_red_marks_along_the_weyl_sequence(sockets, port):
    # Kmin 2 frames, Kmax 10: the n-th packet at or over Kmin draws n x WEYL_STEP mod
    # 2^16 against a probability rising linearly to Pmax; the P4 switch draws the same.
    kmin, kmax, pmax = 2 * FRAME, 10 * FRAME, PROBABILITY_ONE // 2
    port.configure(ecn_kmin_bytes=kmin, ecn_kmax_bytes=kmax, ecn_pmax=pmax)
    out = exchange(sockets, [data(psn) for psn in range(14)])
    expected, n = [], 0
    for i in range(14):
        backlog = i * FRAME  # what the queue holds when packet i arrives
        mark = False
        if backlog >= kmin:
            draw = (n * WEYL_STEP) & (PROBABILITY_ONE - 1)
            n += 1
            mark = backlog >= kmax or draw < pmax * (backlog - kmin) // (kmax - kmin)
        expected.append(protocol.ECN_CE if mark else protocol.ECN_ECT0)
    assert [p[IPv6].tc & protocol.ECN_MASK for p in out] == expected
    assert 0 < expected.count(protocol.ECN_CE) < 12


def test_by_class_on_a_port_facing_a_host(sockets, port):
    # ECN per traffic class: the lossless class is marked at every hop (DCQCN), MRC's
    # classes never on the last hop.
    port.configure(host_facing=True, ecn_kmin_bytes=2 * FRAME, ecn_kmax_bytes=2 * FRAME)
    sent = [data(psn, cls=protocol.ROCE) for psn in range(4)]
    out = exchange(sockets, sent)
    assert [p[IPv6].tc & protocol.ECN_MASK for p in out] == [protocol.ECN_ECT0] * 2 \
        + [protocol.ECN_CE] * 2
    for cls in (protocol.TRIMMABLE, protocol.NO_TRIM):
        port.empty_queues()
        out = exchange(sockets, [data(psn, cls=cls) for psn in range(4)])
        assert [p[IPv6].tc for p in out] == [tc(cls)] * 4
    assert port.counters()["ecn_marked"] == 2


# ---------------------------------------------------------------------- priority
def test_the_priority_class_and_trimmed_headers_overtake_queued_data(sockets, port):
    link = LinkParams(rate_mbit=1, delay_ms=0, queue_pkts=64)
    batch = "\n".join(cfg.qdisc_commands(TX, link)) + "\n"
    done = subprocess.run(["ip", "netns", "exec", NS, "tc", "-batch", "-"], input=batch,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    port.configure(trim_threshold_bytes=20 * FRAME, dscp_trimmed=DSCP[protocol.TRIMMED])
    # At 1 Mbit/s a full frame takes 10 ms: the burst is still queued when the SACK
    # and the trimmed headers behind it arrive.
    out = exchange(sockets, [data(psn) for psn in range(24)]
                   + [mrc(protocol.CONTROL, 99, kind=protocol.SACK)])
    early = [i for i, p in enumerate(out) if p[IPv6].tc >> 2 != DSCP[protocol.TRIMMABLE]]
    assert len(out) == 25
    # Each leaves within a few data packets of arriving, ahead of the rest of the burst.
    assert len(early) == 5 and max(early) < 12, [psn_of(p) for p in out]
    whole = [psn_of(p) for p in out if p[IPv6].tc >> 2 == DSCP[protocol.TRIMMABLE]]
    assert whole == sorted(whole)


# ---------------------------------------------------------------------- faults
def test_port_loss_all_or_nothing(sockets, port):
    port.configure()
    port.program.write([cfg.loss_write(port.ifindex, 1.0)])
    assert exchange(sockets, [data(psn) for psn in range(10)]) == []
    assert port.counters()["fault_dropped"] == 10
    port.program.write([cfg.loss_write(port.ifindex, 0.0)])
    assert len(exchange(sockets, [data(psn) for psn in range(10)])) == 10
    assert {k: v for k, v in port.counters().items() if v} == {"forwarded": 10,
                                                                "fault_dropped": 10}


def test_gray_loss_drops_exactly_one_path(sockets, port):
    port.configure()
    write = port.program.write
    write([cfg.gray_loss_write(port.ifindex, PATH_A, 1.0)])
    sent = [data(psn, dst=PATH_A if psn % 2 else PATH_B) for psn in range(10)]
    assert [psn_of(p) for p in exchange(sockets, sent)] == [0, 2, 4, 6, 8]
    assert port.counters()["fault_dropped"] == 5
    # A prefix names every path through one spine; clearing it brings them back. The
    # same prefix on another port is another entry.
    write([cfg.gray_loss_clear(port.ifindex, PATH_A),
           cfg.gray_loss_write(port.ifindex, "fcbb:bb00:2000::", 1.0, prefix_len=48),
           cfg.gray_loss_write(port.ifindex + 1000, "fcbb:bb00:2001::", 1.0, prefix_len=48)])
    assert [psn_of(p) for p in exchange(sockets, sent)] == [1, 3, 5, 7, 9]
    write([cfg.gray_loss_clear(port.ifindex, "fcbb:bb00:2000::", prefix_len=48),
           cfg.gray_loss_clear(port.ifindex + 1000, "fcbb:bb00:2001::", prefix_len=48)])
    write([cfg.gray_loss_clear(port.ifindex, "fcbb:bb00:2000::", prefix_len=48)])  # fine
    assert len(exchange(sockets, sent)) == 10


def test_an_unconfigured_port_passes_everything_untouched(sockets, port):
    port.program.write([cfg.MapWrite(cfg.PORTS_MAP, cfg.key(port.ifindex), None)])
    sent = [data(psn) for psn in range(3)]
    assert [bytes(p) for p in exchange(sockets, sent)] == [bytes(p) for p in sent]


def test_not_available_says_why(namespace, tmp_path):
    missing = tmp_path / "missing.o"
    available, reason = ebpf_available(missing, namespace, PIN.with_name(PIN.name + "-x"))
    assert not available and reason.startswith("no eBPF switch program: it could not be "
                                               "loaded here")
    assert "is not built" in reason
    broken = tmp_path / "broken.o"
    broken.write_bytes(b"not an ELF object")
    available, reason = ebpf_available(broken, namespace, PIN.with_name(PIN.name + "-x"))
    assert not available and reason.startswith("no eBPF switch program")
    assert "clsact" not in run("tc qdisc show dev lo")  # the probe cleans up
    assert not PIN.with_name(PIN.name + "-x").exists()
