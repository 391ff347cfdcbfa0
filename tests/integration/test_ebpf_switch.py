"""The eBPF switch program on a real port: trimming, drops, ECN, priority, faults, counters.

No Mininet: one network namespace with one veth pair. The program runs on the egress of
`ebpft0`; packets built with scapy (the MRC layer of hosts/mrc_scapy.py) are sent
into `ebpft0` through a packet socket and captured as they arrive on `ebpft1`. The
virtual queue drains at 1 byte/s, so it holds exactly the bytes sent so far and every
threshold is crossed at a known packet; the expected packets are built field by field,
as tests/p4/test_mrc_switch.py builds them for the P4 switch, and compared byte for
byte. Root is needed (tests/integration/conftest.py skips without it); clang, libbpf-dev
and bpftool too (skipped with the reason otherwise).
"""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller import ebpf_config as cfg
from hosts import protocol
from hosts.mrc_scapy import MRC, MRCControl
from tests.netns import in_namespace
from topologies.ebpf_port import EbpfPort, build, ebpf_available
from topologies.model import LinkParams

NS = f"ebpft-{os.getpid()}"
TX, RX = "ebpft0", "ebpft1"
ETH_P_ALL = 0x0003
FRAME = protocol.DATA_FRAME_BYTES
PAYLOAD = protocol.DEFAULT_MTU_PAYLOAD
TRIMMABLE = protocol.traffic_class(protocol.DSCP_TRIMMABLE, protocol.ECN_ECT0)
NO_TRIM = protocol.traffic_class(protocol.DSCP_NO_TRIM, protocol.ECN_ECT0)
ROCE = protocol.traffic_class(protocol.DSCP_ROCE, protocol.ECN_ECT0)
PATH_A = "fcbb:bb00:2001:1001:8003::"
PATH_B = "fcbb:bb00:2000:1001:8003::"


def run(command: str) -> str:
    """Run a shell command in the test namespace (what Mininet's node.cmd does)."""
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
def sockets(obj):
    """The namespace and its veth pair (IPv6 off, so the kernel sends nothing of its
    own); yields (tx, rx) packet sockets. Deleted afterwards, even on failure."""
    try:
        sh("ip", "netns", "add", NS)
        run("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        run(f"ip link add {TX} type veth peer name {RX}; ip link set {TX} up; "
            f"ip link set {RX} up")
        available, reason = ebpf_available(run, obj, cfg.SECTION)
        if not available:
            pytest.skip(reason)
        with in_namespace(NS):
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        tx.bind((TX, 0))
        rx.bind((RX, 0))
        rx.settimeout(0.3)
        yield tx, rx
        tx.close()
        rx.close()
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    assert NS not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout


def port_config(host_facing: bool = False, ecn: int = cfg.NEVER, trim: int = cfg.NEVER,
                drop: int = cfg.NEVER) -> cfg.PortConfig:
    """A port whose virtual queue drains at 1 byte/s: it holds what was sent."""
    return cfg.PortConfig(1, ecn, trim, drop, host_facing)


@pytest.fixture
def port(sockets, obj):
    """The program freshly loaded on the TX port (new maps, zero counters)."""
    loaded = EbpfPort(run, TX)
    loaded.load(obj, cfg.SECTION)
    yield loaded
    loaded.unload()
    run(f"tc qdisc del dev {TX} root 2>/dev/null")


def data(psn: int, tc: int = TRIMMABLE, dst: str = PATH_A, payload: bytes | None = None):
    body = payload if payload is not None else bytes([psn % 256]) * PAYLOAD
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IPv6(src="fcbb:bb00:8000::", dst=dst, tc=tc, hlim=63)
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.DATA, conn_id=3, ev=0x00010001, psn=psn, msg_len=100_000)
            / body)


def sack(psn: int, dst: str = PATH_A):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IPv6(src="fcbb:bb00:8000::", dst=dst, tc=protocol.ECN_ECT0, hlim=63)
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.SACK, conn_id=3, ev=0x00010001, psn=psn)
            / MRCControl(cum_psn=psn))


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
        if pkt.haslayer(MRC):
            got.append(pkt)


def trimmed(pkt, last_hop: bool):
    """What the P4 switch makes of a trimmed packet (p4src/include/egress.p4)."""
    out = copy.deepcopy(pkt)
    out[MRC].payload_len = len(pkt[MRC].payload)  # kept: what the receiver asks again
    out[MRC].remove_payload()
    out[MRC].flags = "TRIMMED+TRIMMED_LASTHOP" if last_hop else "TRIMMED"
    out[IPv6].plen = out[UDP].len = protocol.TRIMMED_L4_BYTES
    return out


def counters(port: EbpfPort) -> dict[str, int]:
    return cfg.decode_counters(port.read_counters(cfg.COUNTERS_MAP))


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
    for name, code in zip(cfg.PORT_CONFIG_FIELDS, "QIIIIIBB"):
        expected[name] = at
        at += {"Q": 8, "I": 4, "B": 1}[code]
    assert {k: offsets[k] for k in expected} == expected
    assert structs["vq_state"]["size"] == cfg.VQUEUE_STATE.size
    assert structs["gray_key"]["size"] == cfg.GRAY_KEY.size


# ---------------------------------------------------------------------- trimming
@pytest.mark.parametrize("host_facing", [False, True])
def test_trimmed_exactly_as_the_p4_switch_trims(sockets, port, host_facing):
    port.apply(port_config(host_facing, trim=3 * FRAME).write())
    sent = [data(psn) for psn in range(5)]
    out = exchange(sockets, sent)
    assert [p[MRC].psn for p in out] == list(range(5))
    # Three full frames fill the queue to the threshold; the fourth and fifth are cut.
    assert [bytes(p) for p in out[:3]] == [bytes(p) for p in sent[:3]]
    for got, pkt in zip(out[3:], sent[3:]):
        assert bytes(got) == bytes(trimmed(pkt, host_facing))
        assert len(bytes(got)) == protocol.TRIMMED_FRAME_BYTES
    assert counters(port) == {"forwarded": 5, "trimmed": 2, "ecn_marked": 0, "dropped": 0,
                              "fault_dropped": 0}


def test_untrimmable_data_is_dropped_at_the_queue_limit_never_trimmed(sockets, port):
    port.apply(port_config(trim=2 * FRAME, drop=4 * FRAME).write())
    out = exchange(sockets, [data(psn, tc=NO_TRIM) for psn in range(6)])
    # Whole up to the queue limit (the trim threshold does not apply), then dropped.
    assert [p[MRC].psn for p in out] == [0, 1, 2, 3]
    assert not any(p[MRC].flags.TRIMMED for p in out)
    assert counters(port)["dropped"] == 2 and counters(port)["forwarded"] == 4


def test_control_packets_are_never_trimmed(sockets, port):
    port.apply(port_config(trim=FRAME, drop=FRAME).write())
    sent = [data(0)] + [sack(psn) for psn in range(1, 5)]
    out = exchange(sockets, sent)
    assert [bytes(p) for p in out] == [bytes(p) for p in sent]
    assert counters(port)["trimmed"] == 0


# ---------------------------------------------------------------------- ECN
def test_ecn_marked_on_a_fabric_port(sockets, port):
    port.apply(port_config(ecn=2 * FRAME).write())
    sent = [data(psn) for psn in range(4)] + [data(4, tc=protocol.DSCP_TRIMMABLE << 2)]
    out = exchange(sockets, sent)
    marks = [p[IPv6].tc & protocol.ECN_MASK for p in out]
    # Not-ECT (the last packet) is never marked.
    assert marks == [protocol.ECN_ECT0] * 2 + [protocol.ECN_CE] * 2 + [protocol.ECN_NOT_ECT]
    expected = copy.deepcopy(sent[3])
    expected[IPv6].tc = protocol.traffic_class(protocol.DSCP_TRIMMABLE, protocol.ECN_CE)
    assert bytes(out[3]) == bytes(expected)
    assert counters(port)["ecn_marked"] == 2


def test_never_marked_on_a_port_facing_a_host(sockets, port):
    port.apply(port_config(host_facing=True, ecn=FRAME).write())
    out = exchange(sockets, [data(psn) for psn in range(4)])
    assert [p[IPv6].tc for p in out] == [TRIMMABLE] * 4
    assert counters(port)["ecn_marked"] == 0


def test_the_roce_class_is_marked_on_a_port_facing_a_host_and_mrc_data_is_not(sockets,
                                                                              port):
    # ECN per traffic class: the RoCE class is marked at every hop (DCQCN), MRC's
    # classes never on the last hop. Each burst finds the same backlog, and the RoCE
    # class is not trimmable: a trim threshold it passes does not cut it.
    port.apply(port_config(host_facing=True, ecn=2 * FRAME, trim=FRAME).write())
    sent = [data(psn, tc=ROCE) for psn in range(4)]
    out = exchange(sockets, sent)
    marks = [p[IPv6].tc & protocol.ECN_MASK for p in out]
    assert marks == [protocol.ECN_ECT0] * 2 + [protocol.ECN_CE] * 2
    expected = copy.deepcopy(sent[3])
    expected[IPv6].tc = protocol.traffic_class(protocol.DSCP_ROCE, protocol.ECN_CE)
    assert bytes(out[3]) == bytes(expected)  # only the ECN bits changed
    assert counters(port)["ecn_marked"] == 2
    port.apply(port_config(host_facing=True, ecn=2 * FRAME).write())
    for tc in (TRIMMABLE, NO_TRIM):
        port.apply(cfg.vqueue_reset())
        out = exchange(sockets, [data(psn, tc=tc) for psn in range(4)])
        assert [p[IPv6].tc for p in out] == [tc] * 4
    # Not-ECT RoCE data is never marked either.
    port.apply(cfg.vqueue_reset())
    out = exchange(sockets, [data(psn, tc=protocol.DSCP_ROCE << 2) for psn in range(4)])
    assert [p[IPv6].tc for p in out] == [protocol.DSCP_ROCE << 2] * 4
    assert counters(port)["ecn_marked"] == 2 and counters(port)["trimmed"] == 0


# ---------------------------------------------------------------------- priority
def test_control_packets_and_trimmed_headers_overtake_queued_data(sockets, port):
    link = LinkParams(rate_mbit=1, delay_ms=0, queue_pkts=64)
    for command in cfg.qdisc_commands(TX, link):
        assert run(f"{command} 2>&1; echo $?").strip().endswith("0"), command
    port.apply(port_config(trim=20 * FRAME).write())
    # At 1 Mbit/s a full frame takes 10 ms: the burst is still queued when the SACK
    # and the trimmed headers behind it arrive.
    out = exchange(sockets, [data(psn) for psn in range(24)] + [sack(99)])
    order = [(p[MRC].type, bool(p[MRC].flags.TRIMMED), p[MRC].psn) for p in out]
    assert len(order) == 25
    first_control = [i for i, (kind, cut, _) in enumerate(order)
                     if kind == protocol.SACK or cut]
    # Each leaves within a few data packets of arriving, ahead of the rest of the burst.
    assert len(first_control) == 5 and max(first_control) < 12, order
    data_order = [psn for kind, cut, psn in order if kind == protocol.DATA and not cut]
    assert data_order == sorted(data_order)


# ---------------------------------------------------------------------- faults
def test_port_loss_all_or_nothing(sockets, port):
    port.apply(port_config().write())
    port.apply(cfg.loss_write(1.0))
    assert exchange(sockets, [data(psn) for psn in range(10)]) == []
    assert counters(port)["fault_dropped"] == 10
    port.apply(cfg.loss_write(0.0))
    assert len(exchange(sockets, [data(psn) for psn in range(10)])) == 10
    assert counters(port) == {"forwarded": 10, "trimmed": 0, "ecn_marked": 0, "dropped": 0,
                              "fault_dropped": 10}


def test_gray_loss_drops_exactly_one_path(sockets, port):
    port.apply(port_config().write())
    port.apply(cfg.gray_loss_write(PATH_A, 1.0))
    sent = [data(psn, dst=PATH_A if psn % 2 else PATH_B) for psn in range(10)]
    out = exchange(sockets, sent)
    assert [p[MRC].psn for p in out] == [0, 2, 4, 6, 8]
    assert counters(port)["fault_dropped"] == 5
    # A prefix names every path through one spine; clearing it brings them back.
    port.apply(cfg.gray_loss_clear(PATH_A))
    port.apply(cfg.gray_loss_write("fcbb:bb00:2000::", 1.0, prefix_len=48))
    out = exchange(sockets, sent)
    assert [p[MRC].psn for p in out] == [1, 3, 5, 7, 9]
    port.apply(cfg.gray_loss_clear("fcbb:bb00:2000::", prefix_len=48))
    port.apply(cfg.gray_loss_clear("fcbb:bb00:2000::", prefix_len=48))  # gone already: fine
    assert len(exchange(sockets, sent)) == 10


def test_unconfigured_port_passes_everything_untouched(sockets, port):
    sent = [data(psn) for psn in range(3)]
    assert [bytes(p) for p in exchange(sockets, sent)] == [bytes(p) for p in sent]
    assert counters(port)["forwarded"] == 0


def test_reset_empties_the_virtual_queue(sockets, port):
    port.apply(port_config(trim=2 * FRAME).write())
    exchange(sockets, [data(psn) for psn in range(3)])
    port.apply(cfg.vqueue_reset())
    out = exchange(sockets, [data(psn) for psn in range(2)])
    assert not any(p[MRC].flags.TRIMMED for p in out)


def test_each_port_has_its_own_maps_and_nothing_is_left_after_unload(sockets, obj):
    ports = [EbpfPort(run, TX), EbpfPort(run, RX)]
    for loaded in ports:
        loaded.load(obj, cfg.SECTION)
        assert set(loaded.maps) >= {cfg.CONFIG_MAP, cfg.VQUEUE_MAP, cfg.COUNTERS_MAP,
                                    cfg.LOSS_MAP, cfg.GRAY_MAP}
    assert not set(ports[0].maps.values()) & set(ports[1].maps.values())
    ids = [loaded.maps[cfg.CONFIG_MAP] for loaded in ports]
    for loaded in ports:
        loaded.unload()
    time.sleep(0.2)  # maps are freed after an RCU grace period
    for map_id in ids:
        gone = subprocess.run(["bpftool", "map", "show", "id", str(map_id)],
                              capture_output=True)
        assert gone.returncode != 0


def test_not_available_says_why(sockets, tmp_path):
    missing = tmp_path / "missing.o"
    assert ebpf_available(run, missing, cfg.SECTION) == (
        False, f"no eBPF switch program: {missing} is not built (clang, libbpf-dev: make deps)")
    broken = tmp_path / "broken.o"
    broken.write_bytes(b"not an ELF object")
    available, reason = ebpf_available(run, broken, cfg.SECTION)
    assert not available and reason.startswith("no eBPF switch program: tc could not load")
    assert "clsact" not in run("tc qdisc show dev lo")  # the probe cleans up
