"""The receiver: placement by offset, duplicates, SACK/NACK contents, the in-order
(go-back-N) receiver's GAP NACK, garbage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts import protocol, wire
from hosts.config import ProtocolConfig
from hosts.endpoint import make_endpoint
from hosts.protocol import make_ev
from hosts.receiver import MAX_PSN_AHEAD, NO_ANSWER, Receiver
from topologies.model import load_topology

FABRIC = load_topology("2tier-2plane")


def data_header(psn: int, offset: int, length: int, msg_len: int, msg_id: int = 0,
                flags: int = 0) -> wire.Header:
    return wire.Header(protocol.DATA, flags, 0, 0, 1, 0x01000005, msg_id, psn, offset, msg_len,
                       length)


class Sink:
    def __init__(self, in_order: bool = False):
        self.got: dict[int, bytes] = {}
        self.rx = Receiver(0, 1, lambda msg_id, data: self.got.update({msg_id: bytes(data)}),
                           in_order=in_order)

    def put(self, psn, offset, payload, msg_len, msg_id=0, ce=False):
        hdr = data_header(psn, offset, len(payload), msg_len, msg_id)
        return self.rx.on_data(hdr, memoryview(payload), ce, 0.0)


MESSAGE = bytes(range(200)) * 5  # 1000 bytes, 10 packets of 100


def chunks(data=MESSAGE, size=100):
    return [(i, i * size, data[i * size:(i + 1) * size]) for i in range(-(-len(data) // size))]


def test_payloads_are_placed_by_offset_in_any_order():
    sink = Sink()
    order = [7, 2, 9, 0, 5, 1, 8, 3, 6, 4]
    parts = chunks()
    for i in order:
        psn, offset, payload = parts[i]
        assert sink.put(psn, offset, payload, len(MESSAGE)) == (protocol.SACK, 0, 0)
    assert sink.got == {0: MESSAGE}
    assert sink.rx.cum == 10 and sink.rx.bits == 0 and not sink.rx.messages
    assert sink.rx.stats["rx_bytes"] == 1000 and sink.rx.stats["messages_delivered"] == 1


def test_duplicates_are_ignored_but_acknowledged():
    sink = Sink()
    parts = chunks()
    for psn, offset, payload in parts[:3] + parts[:3] + parts[5:6] + parts[5:6]:
        assert sink.put(psn, offset, payload, len(MESSAGE))[0] == protocol.SACK
    assert sink.rx.stats["duplicates"] == 4 and sink.rx.stats["data_rx"] == 4
    assert sink.rx.stats["rx_bytes"] == 400
    for psn, offset, payload in parts:
        sink.put(psn, offset, payload, len(MESSAGE))
    assert sink.got == {0: MESSAGE}  # delivered once, intact


def test_sack_carries_cum_bitmap_echo_ev_marks_and_port_state():
    sink = Sink()
    for psn in (0, 2, 5):
        sink.put(psn, psn * 10, bytes(10), 100, ce=psn == 5)
    ctl = sink.rx.control(0x01000005, 0b01)
    assert ctl == wire.Control(1, 1, 0b10010, 0x01000005, 1, 0b01)
    assert sink.rx.above == {2, 5}
    assert sink.rx.control(0, 0).ecn_marks == 0  # counted since the previous SACK


def test_ecn_mark_is_echoed_in_the_answer():
    sink = Sink()
    assert sink.put(0, 0, bytes(10), 10, ce=True) == (protocol.SACK, protocol.F_ECN_ECHO, 0)
    assert sink.rx.stats["ce_rx"] == 1


def test_bitmap_holds_the_64_psns_above_cum():
    sink = Sink()
    for psn in range(1, 80):
        sink.put(psn, psn, b"x", 100)
    ctl = sink.rx.control(0, 0)
    assert ctl.cum_psn == 0 and ctl.bitmap == (1 << 64) - 2  # bit 0 (PSN 0) is missing
    sink.put(0, 0, b"x", 100)
    assert sink.rx.cum == 80 and sink.rx.control(0, 0).bitmap == 0


def test_trimmed_packet_gets_a_nack_with_the_right_reason_and_is_not_placed():
    sink = Sink()
    # A trimmed packet is told by its traffic class (its DSCP), as UEC's receiver does.
    hdr = data_header(3, 300, 100, 1000)
    assert sink.rx.on_data(hdr, None, False, 0.0, protocol.TRIMMED) == (
        protocol.NACK, 0, protocol.R_TRIMMED)
    assert sink.rx.on_data(hdr, None, False, 0.0, protocol.TRIMMED_LASTHOP) == (
        protocol.NACK, 0, protocol.R_TRIMMED_LASTHOP)
    assert sink.rx.stats["trimmed_rx"] == 2 and sink.rx.cum == 0 and not sink.rx.messages


def test_psn_far_ahead_is_garbage_and_nothing_is_placed():
    sink = Sink()
    sink.put(MAX_PSN_AHEAD + 1, 0, bytes(10), 100)
    sink.put(1 << 31, 0, bytes(10), 100)
    assert sink.rx.stats["out_of_window"] == 2 and not sink.rx.messages and sink.rx.bits == 0


def test_packet_contradicting_its_message_is_dropped_without_marking_its_psn():
    sink = Sink()
    sink.put(0, 0, bytes(10), 100)
    assert sink.put(1, 10, bytes(10), 999)[0] == protocol.SACK  # msg_len differs: not ours
    assert sink.rx.stats["inconsistent"] == 1 and sink.rx.cum == 1
    sink.put(1, 10, bytes(10), 100)  # the genuine packet 1 is still taken
    assert sink.rx.cum == 2


def test_in_order_receiver_drops_everything_but_the_next_psn():
    sink = Sink(in_order=True)
    parts = chunks()
    sink.put(*parts[1], len(MESSAGE))
    assert sink.rx.stats["out_of_order_drops"] == 1 and sink.rx.cum == 0
    for part in parts:
        sink.put(*part, len(MESSAGE))
    assert sink.got == {0: MESSAGE}


def test_in_order_receiver_nacks_the_first_packet_of_a_gap_with_the_expected_psn():
    sink = Sink(in_order=True)
    parts = chunks()
    sink.put(*parts[0], len(MESSAGE))
    # PSN 1 is lost: 2 is answered at once by a GAP NACK whose body expects PSN 1,
    # and 3 and 4 by nothing.
    assert sink.put(*parts[2], len(MESSAGE)) == (protocol.NACK, 0, protocol.R_GAP)
    assert sink.rx.control(0, 3).cum_psn == 1
    assert sink.put(*parts[3], len(MESSAGE)) == (NO_ANSWER, 0, 0)
    assert sink.put(*parts[4], len(MESSAGE)) == (NO_ANSWER, 0, 0)
    assert sink.rx.stats["naks"] == 1 and sink.rx.stats["out_of_order_drops"] == 3
    # Go-back-N resends from 1; a later gap gets a NACK of its own.
    for part in parts[1:4]:
        assert sink.put(*part, len(MESSAGE))[0] == protocol.SACK
    assert sink.put(*parts[6], len(MESSAGE)) == (protocol.NACK, 0, protocol.R_GAP)
    assert sink.rx.control(0, 3).cum_psn == 4 and sink.rx.stats["naks"] == 2


def test_a_queue_pair_receiver_starts_at_its_first_psn():
    sink = Sink(in_order=True)
    sink.rx = Receiver(0, 1, lambda msg_id, data: sink.got.update({msg_id: bytes(data)}),
                       in_order=True, first_psn=3 << protocol.QP_PSN_SHIFT)
    first = 3 << protocol.QP_PSN_SHIFT
    for psn, offset, payload in chunks():
        assert sink.put(first + psn, offset, payload, len(MESSAGE))[0] == protocol.SACK
    assert sink.got == {0: MESSAGE} and sink.rx.cum == first + 10


def test_messages_interleaved_on_one_connection():
    sink = Sink()
    a, b = bytes([1]) * 250, bytes([2]) * 150
    sink.put(0, 0, a[:100], 250, msg_id=1)
    sink.put(3, 0, b[:100], 150, msg_id=2)
    sink.put(4, 100, b[100:], 150, msg_id=2)
    sink.put(2, 200, a[200:], 250, msg_id=1)
    assert sink.got == {2: b}
    sink.put(1, 100, a[100:200], 250, msg_id=1)
    assert sink.got == {1: a, 2: b}


# ---------------------------------------------------------------------- garbage at the door
def endpoint():
    return make_endpoint("mrc", 1, FABRIC, {}, lambda e: None, lambda *a: None,
                         lambda *a: None)


def valid_packets() -> list[bytes]:
    ctl = wire.Control(1, 1, 3, 5, 0, 3)
    return [wire.encode_data(protocol.F_LAST, 0, 0x10001, 5, 0, 0, 0, 4, b"abcd"),
            wire.encode_control(protocol.SACK, 0, 0, 0, 0x10000, 5, 0, 0, ctl),
            wire.encode_control(protocol.PROBE, 0, 0, 0, 0x10000, 5, 0, 0, ctl)]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.one_of(
    st.binary(max_size=120),
    st.tuples(st.sampled_from(valid_packets()), st.integers(0, 55), st.integers(0, 255))
    .map(lambda t: t[0][:t[1] % len(t[0])] + bytes([t[2]]) + t[0][t[1] % len(t[0]) + 1:]),
    st.tuples(st.sampled_from(valid_packets()), st.integers(0, 60))
    .map(lambda t: t[0][:t[1]]),
))
def test_garbage_never_raises_out_of_the_endpoint(data):
    host = endpoint()
    host.on_datagram(0, 0, data, False, 0.0)
    host.poll(0.0)


def test_garbage_is_counted():
    host = endpoint()
    for junk in (b"", b"\x00" * 31, b"\x21" + bytes(31), b"\x1f" + bytes(55),
                 wire.encode_data(0, 0, 1, 5, 0, 0, 0, 1 << 30, bytes(10))):
        host.on_datagram(0, 0, junk, False, 0.0)
    assert host.counters["garbage"] == 5


def test_decode_refuses_huge_messages_so_no_buffer_is_allocated():
    config = ProtocolConfig()
    assert config.mtu_payload < protocol.MAX_MSG_LEN
    forged = wire.encode_data(0, 0, 1, 5, 0, 0, 0, 0xFFFFFFFF, bytes(10))
    host = endpoint()
    host.on_datagram(0, 0, forged, False, 0.0)
    assert host.counters["garbage"] == 1 and not any(r.messages for r in host.receivers.values())


# ---------------------------------------------------------------------- SACK batching
def batch_answers(host, packets):
    """Feed one receive batch of DATA packets; the SACKs sent at its end, decoded."""
    for plane, ev, psn in packets:
        data = wire.encode_data(0, plane, 0x10001, ev, 0, psn, psn * 10, 10_000, bytes(10))
        host.on_datagram(plane, 0, data, False, 0.0)
    return [(plane, *wire.decode(data)[:2]) for plane, _, _, data, _ in host.poll(0.0)]


def acked_by(answers) -> set[int]:
    acked = set()
    for _, hdr, ctl in answers:
        acked |= set(range(ctl.cum_psn)) | {hdr.psn}
        acked |= {ctl.sack_base + i for i in range(64) if ctl.bitmap >> i & 1}
    return acked


def test_a_batch_is_answered_by_one_sack_per_path_covering_every_packet():
    host = endpoint()
    # Plane 0 and 1, spines 0 and 1 (EV choice 4 and 5): 3 packets on each path.
    packets = [(p, make_ev(p, 4 + s), 4 * i + 2 * p + s) for i in range(3) for p in (0, 1)
               for s in (0, 1)]
    answers = batch_answers(host, packets)
    assert len(answers) == 4  # one per (plane, path), on that plane
    assert sorted((plane, hdr.ev & 1) for plane, hdr, _ in answers) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    assert acked_by(answers) >= {psn for _, _, psn in packets}


def test_held_sacks_answer_a_connection_across_its_paths_once_due():
    host = make_endpoint("mrc", 1, FABRIC, {"ack_delay_rtts": 0.5}, lambda e: None,
                         lambda *a: None, lambda *a: None)
    due = 0.5 * FABRIC.spec.base_rtt_s
    # Two planes, two paths each: 6 packets, fewer than ack_every.
    packets = [(p, make_ev(p, 4 + s), 4 * i + 2 * p + s) for i in range(2) for p in (0, 1)
               for s in (0, 1)][:6]
    assert batch_answers(host, packets) == []  # held: nothing at the batch's end
    assert host.next_wakeup(0.0) == pytest.approx(due)
    assert host.poll(due * 0.99) == []
    answers = [(plane, *wire.decode(data)[:2]) for plane, _, _, data, _ in host.poll(due)]
    assert len(answers) == 1 and answers[0][0] == packets[-1][0]  # the latest's plane
    assert answers[0][1].psn == packets[-1][2]
    assert acked_by(answers) >= {psn for _, _, psn in packets}
    # ack_every packets are answered at once, held or not.
    more = [(0, make_ev(0, 4), psn) for psn in range(6, 14)]
    assert len(batch_answers(host, more)) == 1


def test_packets_beyond_the_bitmap_get_a_sack_based_at_them():
    host = endpoint()
    # PSN 0 never arrives: the cumulative point stays at 0; these lie 100-330 above it.
    packets = [(0, 4, psn) for psn in (100, 130, 200, 260, 330)]
    answers = batch_answers(host, packets)
    # 100 and 130 share a bitmap, 200 and 260 another; 330 rides in the header.
    assert len(answers) == 3
    assert acked_by(answers) >= {100, 130, 200, 260, 330}
    assert {ctl.sack_base for _, _, ctl in answers} == {0, 100, 200}
