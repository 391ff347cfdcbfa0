"""PTF tests of the P4 switch on BMv2: shift-and-forward, drops, hop limit, ECN (per
traffic class), trimming.

Packets are built with scapy (and the MRC layer of hosts/mrc_scapy.py) and sent into
the switch with ptf.testutils; the expected packets are built the same way, field by
field, and compared byte for byte on the port they must leave by, with no packet
allowed anywhere else. The switch is T0 p0t0r0 of 2tier-2plane (tests/p4/conftest.py):
port 0 -> h0, port 1 -> h1, port 2 -> T1 p0t1s0, port 3 -> T1 p0t1s1.
"""

from __future__ import annotations

import copy
import os
import signal
import time

from ptf import testutils
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether

from controller.program import read_counters
from hosts import protocol
from hosts.mrc_scapy import MRC, MRCControl
from topologies.addressing import mac_address

SWITCH_MAC = [mac_address("p0t0r0", p) for p in range(4)]
PEER_MAC = [mac_address("h0", 0), mac_address("h1", 0), mac_address("p0t1s0", 0),
            mac_address("p0t1s1", 0)]
H0, H3 = "fcbb:bb00:8000::", "fcbb:bb00:8003::"
UP_TO_S1 = "fcbb:bb00:1000:2001:1001:8003::"  # h0 -> h3 through T1 spine 1 (port 3)
DOWN_TO_H1 = "fcbb:bb00:1000:8001::"  # from a T1, last hop to h1 (port 1)
ECT0, CE = protocol.ECN_ECT0, protocol.ECN_CE


def frame(dst: str, in_port: int = 0, hop_limit: int = 64, ecn: int = 0,
          payload: bytes = b"x" * 100, psn: int = 0, dscp: int = protocol.DSCP_TRIMMABLE):
    """A DATA packet as a host or a T1 would send it into `in_port` (of mrc, whose
    data is trimmable, unless `dscp` says otherwise)."""
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src=H0, dst=dst, hlim=hop_limit, tc=protocol.traffic_class(dscp, ecn))
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.DATA, conn_id=3, ev=0x00010001, psn=psn, msg_len=100_000)
            / payload)


def sack(dst: str, in_port: int = 0):
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src=H0, dst=dst, tc=ECT0)
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.SACK, conn_id=3, ev=0x00010001) / MRCControl(cum_psn=7))


def forwarded(pkt, out_port: int, dst: str, ecn: int | None = None):
    """What the switch must send: next uSID active, hop limit down, MACs of the hop."""
    out = copy.deepcopy(pkt)
    out[Ether].src, out[Ether].dst = SWITCH_MAC[out_port], PEER_MAC[out_port]
    out[IPv6].dst = dst
    out[IPv6].hlim -= 1
    if ecn is not None:
        out[IPv6].tc = (out[IPv6].tc & ~0b11) | ecn
    return out


def collect(test, port: int, seconds: float) -> list:
    """Every packet that leaves `port` within `seconds`, parsed."""
    got, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        result = test.dataplane.poll(0, port, timeout=max(0.01, end - time.monotonic()))
        if isinstance(result, test.dataplane.PollSuccess):
            got.append(Ether(result.packet))
    return got


def counted(switch, counter: str, port: int) -> int:
    """What the switch's `counter` (e.g. MrcEgress.trimmed_packets) holds for `port`."""
    return read_counters(switch["grpc"], 1, switch["p4info"])[counter].get(port, 0)


def dropped(switch) -> dict[int, int]:
    return read_counters(switch["grpc"], 1, switch["p4info"])["MrcIngress.dropped_packets"]


# ---------------------------------------------------------------------- forwarding
def test_a_burst_waits_while_the_switch_is_stalled(test, switch):
    """What arrives while BMv2 waits for a CPU waits in its port's capture ring
    (topologies/offloads.py): 60 full frames, twice what a ring of 64 KiB slots holds."""
    burst = [frame(DOWN_TO_H1, payload=bytes([i]) * protocol.DEFAULT_MTU_PAYLOAD, psn=i)
             for i in range(60)]
    os.kill(switch["pid"], signal.SIGSTOP)
    try:
        for pkt in burst:
            testutils.send_packet(test, 0, pkt)
        time.sleep(0.2)
    finally:
        os.kill(switch["pid"], signal.SIGCONT)
    out = [p for p in collect(test, 1, 2.0) if MRC in p]
    assert sorted(p[MRC].psn for p in out) == list(range(60))


def test_shift_and_forward_up_to_a_t1(test):
    pkt = frame(UP_TO_S1)
    testutils.send_packet(test, 0, pkt)
    testutils.verify_packets(test, forwarded(pkt, 3, "fcbb:bb00:2001:1001:8003::"), [3])


def test_the_other_spine_is_the_other_port(test):
    pkt = frame("fcbb:bb00:1000:2000:1001:8003::")
    testutils.send_packet(test, 0, pkt)
    testutils.verify_packets(test, forwarded(pkt, 2, "fcbb:bb00:2000:1001:8003::"), [2])


def test_last_hop_to_a_host(test):
    pkt = frame(DOWN_TO_H1, in_port=2)
    testutils.send_packet(test, 2, pkt)
    testutils.verify_packets(test, forwarded(pkt, 1, "fcbb:bb00:8001::"), [1])


def test_same_rack_path_down_from_the_t0(test):
    pkt = frame(DOWN_TO_H1, in_port=0)
    testutils.send_packet(test, 0, pkt)
    testutils.verify_packets(test, forwarded(pkt, 1, "fcbb:bb00:8001::"), [1])


# ---------------------------------------------------------------------- drops
def test_not_mine_no_route_and_not_ipv6_are_dropped_and_counted(test, switch):
    before = dropped(switch).get(0, 0)
    testutils.send_packet(test, 0, frame("fcbb:bb00:1001:8001::"))  # a T0 of rack 1
    testutils.send_packet(test, 0, frame("fcbb:bb00:1000:9999::"))  # mine, then nowhere
    testutils.send_packet(test, 0, frame("fcbb:bb01:1000:8001::"))  # another block
    testutils.send_packet(test, 0, Ether(src=PEER_MAC[0], dst=SWITCH_MAC[0]) / ARP())
    testutils.verify_no_other_packets(test)
    assert dropped(switch).get(0, 0) - before == 4


def test_hop_limit(test, switch):
    before = dropped(switch).get(0, 0)
    testutils.send_packet(test, 0, frame(DOWN_TO_H1, hop_limit=1))
    testutils.verify_no_other_packets(test)
    assert dropped(switch).get(0, 0) - before == 1
    pkt = frame(DOWN_TO_H1, hop_limit=2)
    testutils.send_packet(test, 0, pkt)
    testutils.verify_packets(test, forwarded(pkt, 1, "fcbb:bb00:8001::"), [1])


# ---------------------------------------------------------------------- ECN
def burst_through_a_busy_port(test, in_port: int, out_port: int, dst: str,
                              ecn: int = ECT0, dscp: int = protocol.DSCP_TRIMMABLE):
    """40 packets into `in_port` towards `dst` through `out_port` made a link of 50
    frames a second: (what was sent, what came out, the ECN bits of each)."""
    test.slow(out_port, 50)
    burst = [frame(dst, in_port=in_port, ecn=ecn, psn=i, dscp=dscp) for i in range(40)]
    for pkt in burst:
        testutils.send_packet(test, in_port, pkt)
    out = collect(test, out_port, 2.0)
    return burst, out, [p[IPv6].tc & 0b11 for p in out]


def test_ecn_marked_on_a_busy_uplink(test):
    burst, out, marks = burst_through_a_busy_port(test, 0, 3, UP_TO_S1)
    assert [p[MRC].psn for p in out] == list(range(40))  # nothing lost, in order
    # The queue (threshold 16) fills as the burst arrives: early packets pass unmarked,
    # the ones that found 16 or more ahead of them carry CE.
    assert marks[:8] == [ECT0] * 8 and marks.count(CE) >= 16
    assert bytes(out[-1]) == bytes(forwarded(burst[-1], 3, "fcbb:bb00:2001:1001:8003::",
                                             ecn=CE))


def test_never_marked_on_the_last_hop_nor_when_not_ect(test):
    _, out, marks = burst_through_a_busy_port(test, 2, 1, DOWN_TO_H1)
    assert len(out) == 40 and marks == [ECT0] * 40
    _, out, marks = burst_through_a_busy_port(test, 0, 3, UP_TO_S1, ecn=0)  # Not-ECT
    assert len(out) == 40 and marks == [0] * 40


def test_the_roce_class_is_marked_on_the_last_hop_and_mrc_data_is_not(test, switch):
    # ECN is configured per traffic class: a RoCE fabric marks every hop for DCQCN, an
    # MRC fabric never marks the last one. The same congested port to h1 serves both.
    before = counted(switch, "MrcEgress.ecn_marked_packets", 1)
    burst, out, marks = burst_through_a_busy_port(test, 2, 1, DOWN_TO_H1,
                                                  dscp=protocol.DSCP_ROCE)
    assert [p[MRC].psn for p in out] == list(range(40))  # never trimmed, nothing lost
    # As on the uplink above: the packets that found 16 or more ahead of them carry CE.
    assert marks[:8] == [ECT0] * 8 and marks.count(CE) >= 16
    assert bytes(out[-1]) == bytes(forwarded(burst[-1], 1, "fcbb:bb00:8001::", ecn=CE))
    assert counted(switch, "MrcEgress.ecn_marked_packets", 1) - before == marks.count(CE)
    roce_marks = marks.count(CE)
    # The same burst of MRC data, trimmable or not, through the same queue: no mark.
    for dscp in (protocol.DSCP_TRIMMABLE, protocol.DSCP_NO_TRIM):
        _, out, marks = burst_through_a_busy_port(test, 2, 1, DOWN_TO_H1, dscp=dscp)
        assert len(out) == 40 and marks == [ECT0] * 40, dscp
    assert counted(switch, "MrcEgress.ecn_marked_packets", 1) - before == roce_marks


# ---------------------------------------------------------------------- trimming
def test_trimming_with_a_saturated_queue(test, switch):
    test.slow(3, 20)
    burst = [frame(UP_TO_S1, payload=bytes([i]) * 1000, psn=i) for i in range(120)]
    for pkt in burst:
        testutils.send_packet(test, 0, pkt)
    out = collect(test, 3, 5.0)
    assert sorted(p[MRC].psn for p in out) == list(range(120))  # each whole or trimmed
    whole = [p for p in out if not p[MRC].flags.TRIMMED]
    cut = [p for p in out if p[MRC].flags.TRIMMED]
    assert whole and len(cut) >= 40
    # A trimmed packet is exactly its headers: lengths fixed, flag set, checksum zero.
    first = cut[0]
    expected = forwarded(burst[first[MRC].psn], 3, "fcbb:bb00:2001:1001:8003::")
    expected[MRC].payload_len = 1000  # kept: what the receiver asks to be sent again
    expected[MRC].remove_payload()
    expected[MRC].flags = "TRIMMED"
    expected[IPv6].plen = expected[UDP].len = protocol.TRIMMED_L4_BYTES
    assert bytes(first) == bytes(expected) and len(bytes(first)) == protocol.TRIMMED_FRAME_BYTES
    # Whole packets carry their payload untouched.
    assert all(bytes(p[MRC].payload) == bytes([p[MRC].psn]) * 1000 for p in whole)
    # Trimmed headers ride the strict-priority queue: they overtake queued data.
    first_cut = out.index(cut[0])
    assert any(p[MRC].psn < cut[0][MRC].psn for p in out[first_cut + 1:])
    assert counted(switch, "MrcEgress.trimmed_packets", 3) >= len(cut)


def test_untrimmable_data_is_never_trimmed_and_a_full_queue_drops_it(test, switch):
    before = counted(switch, "MrcEgress.trimmed_packets", 3)
    test.slow(3, 20)
    for i in range(120):  # the burst of the trimming test above, of mrc-no-trim
        testutils.send_packet(test, 0, frame(UP_TO_S1, payload=bytes([i]) * 1000, psn=i,
                                             dscp=protocol.DSCP_NO_TRIM))
    out = collect(test, 3, 5.0)
    assert out and not any(p[MRC].flags.TRIMMED for p in out)
    assert all(bytes(p[MRC].payload) == bytes([p[MRC].psn]) * 1000 for p in out)
    assert len(out) < 120  # the queue overflowed: what did not fit was dropped
    assert counted(switch, "MrcEgress.trimmed_packets", 3) == before


def test_trimmed_on_the_last_hop_is_flagged_so(test):
    test.slow(1, 20)
    for i in range(120):
        testutils.send_packet(test, 2, frame(DOWN_TO_H1, in_port=2, payload=b"z" * 1000,
                                             psn=i))
    cut = [p for p in collect(test, 1, 5.0) if p[MRC].flags.TRIMMED]
    assert cut and all(p[MRC].flags.TRIMMED_LASTHOP for p in cut)


def test_control_packets_are_never_trimmed_and_overtake_data(test):
    test.slow(3, 20)
    for i in range(100):
        testutils.send_packet(test, 0, frame(UP_TO_S1, payload=b"d" * 1000, psn=i))
    answer = sack(UP_TO_S1)
    testutils.send_packet(test, 0, answer)
    out = collect(test, 3, 5.0)
    sacks = [i for i, p in enumerate(out) if p[MRC].type == protocol.SACK]
    assert len(sacks) == 1
    got = out[sacks[0]]
    assert bytes(got) == bytes(forwarded(answer, 3, "fcbb:bb00:2001:1001:8003::"))
    assert sacks[0] < 64  # ahead of the data still queued when it arrived
