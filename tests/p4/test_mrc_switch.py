"""PTF tests of the P4 switch on BMv2: shift-and-forward, drops, hop limit, and by traffic
class (the DSCP alone): ECN, trimming, priority, the lossless class and its PFC count.

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
DSCP = protocol.DEFAULT_DSCP


def frame(dst: str, in_port: int = 0, hop_limit: int = 64, ecn: int = 0,
          payload: bytes = b"x" * 100, psn: int = 0, cls: int = protocol.TRIMMABLE):
    """A DATA packet as a host or a T1 would send it into `in_port`, of traffic class
    `cls` (its default DSCP; mrc's trimmable data unless said otherwise)."""
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src=H0, dst=dst, hlim=hop_limit, tc=protocol.traffic_class(DSCP[cls], ecn))
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.DATA, conn_id=3, ev=0x00010001, psn=psn, msg_len=100_000)
            / payload)


def sack(dst: str, in_port: int = 0, cls: int = protocol.CONTROL):
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src=H0, dst=dst, tc=protocol.traffic_class(DSCP[cls], ECT0))
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
    """What the switch's `counter` (controller/program.py COUNTERS: trim_pkts...)
    holds for `port`."""
    return read_counters(switch["grpc"], 1, switch["p4info"])[counter].get(port, 0)


def dropped(switch) -> dict[int, int]:
    """What each ingress port could not route."""
    return read_counters(switch["grpc"], 1, switch["p4info"])["unroutable"]


def psn_of(pkt) -> int:
    """The PSN of a packet that came out, trimmed or not (its MRC header is whole)."""
    return MRC(bytes(pkt[UDP].payload)[:protocol.MRC_HEADER_BYTES]).psn


def is_trimmed(pkt) -> bool:
    return pkt[IPv6].tc >> 2 in (DSCP[protocol.TRIMMED], DSCP[protocol.TRIMMED_LASTHOP])


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
                              ecn: int = ECT0, cls: int = protocol.TRIMMABLE):
    """40 packets into `in_port` towards `dst` through `out_port` made a link of 50
    frames a second: (what was sent, what came out, the ECN bits of each)."""
    test.slow(out_port, 50)
    burst = [frame(dst, in_port=in_port, ecn=ecn, psn=i, cls=cls) for i in range(40)]
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
    before = counted(switch, "ecn_marked", 1)
    burst, out, marks = burst_through_a_busy_port(test, 2, 1, DOWN_TO_H1, cls=protocol.ROCE)
    assert [p[MRC].psn for p in out] == list(range(40))  # never trimmed, nothing lost
    # As on the uplink above: the packets that found 16 or more ahead of them carry CE.
    assert marks[:8] == [ECT0] * 8 and marks.count(CE) >= 16
    assert bytes(out[-1]) == bytes(forwarded(burst[-1], 1, "fcbb:bb00:8001::", ecn=CE))
    assert counted(switch, "ecn_marked", 1) - before == marks.count(CE)
    roce_marks = marks.count(CE)
    # The same burst of MRC data, trimmable or not, through the same queue: no mark.
    for cls in (protocol.TRIMMABLE, protocol.NO_TRIM):
        _, out, marks = burst_through_a_busy_port(test, 2, 1, DOWN_TO_H1, cls=cls)
        assert len(out) == 40 and marks == [ECT0] * 40, cls
    assert counted(switch, "ecn_marked", 1) - before == roce_marks


# ---------------------------------------------------------------------- trimming
def saturate(test, cls: int = protocol.TRIMMABLE, out_port: int = 3, seconds: float = 5.0):
    """120 packets of class `cls` through `out_port` (an uplink, or the last hop to h1)
    made a link of 20 frames a second: (what was sent, what came out)."""
    dst, in_port = (UP_TO_S1, 0) if out_port == 3 else (DOWN_TO_H1, 2)
    test.slow(out_port, 20)
    burst = [frame(dst, in_port=in_port, payload=bytes([i]) * 1000, psn=i, cls=cls)
             for i in range(120)]
    for pkt in burst:
        testutils.send_packet(test, in_port, pkt)
    return burst, collect(test, out_port, seconds)


def test_trimming_with_a_saturated_queue(test, switch):
    before = {name: counted(switch, name, 3) for name in
              ("trim_pkts", "tx_trim_pkts", "dropped_trim_pkts")}
    burst, out = saturate(test)
    assert sorted(psn_of(p) for p in out) == list(range(120))  # each whole or trimmed
    whole = [p for p in out if not is_trimmed(p)]
    cut = [p for p in out if is_trimmed(p)]
    assert whole and len(cut) >= 40
    # A trimmed packet is the first trim-size bytes of what it was cut from, its DSCP
    # TRIMMED (a fabric port), its lengths fixed; nothing behind UDP is written.
    first = cut[0]
    sent = forwarded(burst[psn_of(first)], 3, "fcbb:bb00:2001:1001:8003::")
    expected = copy.deepcopy(sent)
    expected[IPv6].tc = protocol.traffic_class(DSCP[protocol.TRIMMED], protocol.ECN_NOT_ECT)
    expected[IPv6].plen = expected[UDP].len = protocol.TRIMMED_L4_BYTES
    size = protocol.TRIMMED_FRAME_BYTES
    assert bytes(first) == bytes(expected)[:size] and len(bytes(first)) == size
    assert bytes(first)[protocol.WIRE_OVERHEAD:] == bytes(sent)[protocol.WIRE_OVERHEAD:size]
    # Whole packets carry their payload untouched.
    assert all(bytes(p[MRC].payload) == bytes([p[MRC].psn]) * 1000 for p in whole)
    # Trimmed headers ride the strict-priority queue: they overtake queued data.
    first_cut = out.index(cut[0])
    assert any(psn_of(p) < psn_of(cut[0]) for p in out[first_cut + 1:])
    # Counted under SONiC's names: every trim sent, none dropped.
    assert counted(switch, "trim_pkts", 3) - before["trim_pkts"] == len(cut)
    assert counted(switch, "tx_trim_pkts", 3) - before["tx_trim_pkts"] == len(cut)
    assert counted(switch, "dropped_trim_pkts", 3) == before["dropped_trim_pkts"]


def test_retransmissions_are_trimmable_too(test):
    _, out = saturate(test, protocol.TRIMMABLE_RETX)
    assert sorted(psn_of(p) for p in out) == list(range(120))
    assert sum(map(is_trimmed, out)) >= 40


def test_untrimmable_data_is_never_trimmed_and_a_full_queue_drops_it(test, switch):
    before = {name: counted(switch, name, 3) for name in ("trim_pkts", "dropped")}
    _, out = saturate(test, protocol.NO_TRIM)  # the trimming test's burst, of mrc-no-trim
    assert out and not any(is_trimmed(p) for p in out)
    assert all(bytes(p[MRC].payload) == bytes([p[MRC].psn]) * 1000 for p in out)
    assert len(out) < 120  # the queue overflowed: what did not fit was dropped, counted
    assert counted(switch, "dropped", 3) - before["dropped"] == 120 - len(out)
    assert counted(switch, "trim_pkts", 3) == before["trim_pkts"]


def test_trimmed_on_the_last_hop_carries_trimmed_lasthop(test):
    _, out = saturate(test, out_port=1)
    cut = [p for p in out if is_trimmed(p)]
    assert cut and {p[IPv6].tc >> 2 for p in cut} == {DSCP[protocol.TRIMMED_LASTHOP]}


def test_the_priority_class_is_never_trimmed_and_overtakes_data(test):
    # A SACK, and a full DATA packet behind UDP with the CONTROL DSCP: the switch reads
    # no further than UDP, so both are priority packets.
    test.slow(3, 20)
    for i in range(100):
        testutils.send_packet(test, 0, frame(UP_TO_S1, payload=b"d" * 1000, psn=i))
    answer = sack(UP_TO_S1)
    disguised = frame(UP_TO_S1, payload=b"c" * 1000, psn=500, cls=protocol.CONTROL)
    testutils.send_packet(test, 0, answer)
    testutils.send_packet(test, 0, disguised)
    out = collect(test, 3, 5.0)
    control = [i for i, p in enumerate(out) if p[IPv6].tc >> 2 == DSCP[protocol.CONTROL]]
    assert len(control) == 2
    assert bytes(out[control[0]]) == bytes(forwarded(answer, 3, "fcbb:bb00:2001:1001:8003::"))
    assert bytes(out[control[1]]) == bytes(forwarded(disguised, 3,
                                                     "fcbb:bb00:2001:1001:8003::"))
    assert max(control) < 64  # ahead of the data still queued when they arrived


# ---------------------------------------------------------------------- lossless class
def test_the_lossless_class_is_never_dropped_and_its_ingress_counts_a_pause(test, switch):
    # BMv2 cannot pause its peer: the pause is counted (pfc_xoff_tx, by ingress port)
    # and the lossless queue is deep enough to hold the burst.
    before = {"pause": counted(switch, "pfc_xoff_tx", 0), "dropped": counted(switch, "dropped", 3)}
    _, out = saturate(test, protocol.ROCE, seconds=8.0)
    assert sorted(psn_of(p) for p in out) == list(range(120))
    assert not any(is_trimmed(p) for p in out)
    assert counted(switch, "dropped", 3) == before["dropped"]
    assert counted(switch, "pfc_xoff_tx", 0) - before["pause"] >= 1


def test_a_roce_ack_takes_the_time_of_its_bytes_not_of_a_full_frame(test):
    # BMv2 paces a queue in packets. A RoCE ack rides its data's lossless class: in the
    # data's queue it would take a full frame's slot, and a port carrying one
    # connection's data and another's acks would give the data half the link. Short
    # lossless frames take a queue of their own, paced in short frames: 40 acks sent
    # behind 60 queued lossless frames leave before the data, at the link's 20 frames a
    # second, is half out.
    test.slow(3, 20)
    for i in range(60):
        testutils.send_packet(test, 0, frame(UP_TO_S1, payload=b"r" * 1000, psn=i,
                                             cls=protocol.ROCE))
    for _ in range(40):
        testutils.send_packet(test, 0, sack(UP_TO_S1, cls=protocol.ROCE))
    out = collect(test, 3, 5.0)
    acks = [i for i, p in enumerate(out) if p[MRC].type == protocol.SACK]
    assert len(acks) == 40 and len(out) == 100
    assert len(bytes(out[acks[0]])) <= protocol.CONTROL_FRAME_BYTES
    assert max(acks) < 70, acks
