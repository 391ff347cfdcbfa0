"""The wire format: struct codec and scapy layer agree on the same byte vectors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from hosts import protocol, wire
from hosts.mrc_scapy import MRC, MRCControl

# DATA: flags LAST, plane 3, conn 0x00010002, ev 0x03000001, msg 7, psn 9, offset 2400,
# msg_len 3000, payload_len 4, then 4 payload bytes.
DATA_HEX = ("11" "08" "03" "00" "00010002" "03000001" "00000007" "00000009" "00000960"
            "00000bb8" "0004" "0000" "deadbeef")
# SACK with ECN echo: cum 5, base 5, bitmap 0b101, echo_ev 0x03000001, marks 1, ports 0xff.
SACK_HEX = ("12" "04" "03" "00" "00010002" "03000001" "00000007" "00000009" "00000000"
            "00000000" "0000" "0000"
            "00000005" "00000005" "0000000000000005" "03000001" "0001" "00ff")


def test_data_vector_struct():
    data = bytes.fromhex(DATA_HEX)
    hdr, ctl, payload = wire.decode(data)
    assert hdr == wire.Header(protocol.DATA, protocol.F_LAST, 3, 0, 0x00010002, 0x03000001, 7, 9,
                              2400, 3000, 4)
    assert ctl is None and bytes(payload) == bytes.fromhex("deadbeef")
    assert wire.encode_data(protocol.F_LAST, 3, 0x00010002, 0x03000001, 7, 9, 2400, 3000,
                            bytes.fromhex("deadbeef")) == data


def test_data_vector_scapy():
    data = bytes.fromhex(DATA_HEX)
    pkt = MRC(data)
    assert (pkt.type, pkt.plane, pkt.conn_id, pkt.ev, pkt.psn, pkt.offset) == (
        protocol.DATA, 3, 0x00010002, 0x03000001, 9, 2400)
    assert pkt.flags.LAST and not pkt.flags.RETRANSMIT
    assert bytes(pkt.payload) == bytes.fromhex("deadbeef")
    built = MRC(type=protocol.DATA, flags="LAST", plane=3, conn_id=0x00010002, ev=0x03000001,
                msg_id=7, psn=9, offset=2400, msg_len=3000) / bytes.fromhex("deadbeef")
    assert bytes(built) == data  # payload_len computed in post_build
    assert "MRC DATA LAST psn=9" in pkt.summary()


def test_sack_vector_both_ways():
    data = bytes.fromhex(SACK_HEX)
    hdr, ctl, _ = wire.decode(data)
    assert hdr.type == protocol.SACK and hdr.flags == protocol.F_ECN_ECHO
    assert ctl == wire.Control(5, 5, 0b101, 0x03000001, 1, 0xFF)
    assert wire.encode_control(protocol.SACK, protocol.F_ECN_ECHO, 3, 0, 0x00010002, 0x03000001,
                               7, 9, ctl) == data
    pkt = MRC(data)
    assert pkt[MRCControl].bitmap == 0b101 and pkt[MRCControl].port_state == 0xFF
    assert bytes(pkt) == data


@pytest.mark.parametrize("kept", [0, 2, 4])
def test_a_trimmed_packet_is_its_header_and_what_the_switch_kept_of_the_payload(kept):
    # A switch cuts a packet to its trim size and says so in the DSCP alone: the header
    # is the sender's, byte for byte, and the receiver takes no payload from it.
    data = bytes.fromhex(DATA_HEX)[:protocol.MRC_HEADER_BYTES + kept]
    hdr, _, payload = wire.decode(data, trimmed=True)
    assert hdr == wire.decode(bytes.fromhex(DATA_HEX))[0]
    assert hdr.payload_len == 4 and payload is None
    # Not told it was trimmed, the same bytes are a packet that lost its tail.
    if kept < 4:
        with pytest.raises(wire.WireError, match="payload_len 4"):
            wire.decode(data)


def test_scapy_stacks_on_ipv6_udp():
    port = protocol.MRC_UDP_PORT
    frame = IPv6(dst="fcbb:bb00:1000:8001::") / UDP(sport=port, dport=port) / MRC(
        bytes.fromhex(SACK_HEX))
    parsed = IPv6(bytes(frame))
    assert parsed[MRC].type == protocol.SACK and parsed[MRCControl].cum_psn == 5


@pytest.mark.parametrize("data,match", [
    (b"", "truncated"),
    (bytes.fromhex(DATA_HEX)[:31], "truncated"),
    (b"\x21" + bytes.fromhex(DATA_HEX)[1:], "version 2"),
    (b"\x19" + bytes.fromhex(DATA_HEX)[1:], "unknown packet type 9"),
    (bytes.fromhex(DATA_HEX)[:-1], "payload_len 4 but 3"),
    (bytes.fromhex(SACK_HEX)[:-2], "must be 56 bytes"),
])
def test_garbage_raises_wire_error(data, match):
    with pytest.raises(wire.WireError, match=match):
        wire.decode(data)


def test_a_trimmed_class_packet_longer_than_its_original_is_garbage():
    with pytest.raises(wire.WireError, match="longer than the packet it was cut from"):
        wire.decode(bytes.fromhex(DATA_HEX) + b"x", trimmed=True)


# NACK, reason TRIMMED_LASTHOP, for PSN 0x0102 of message 3 (offset and msg_len echoed).
NACK_HEX = ("13" "00" "01" "02" "00030001" "01000002" "00000003" "00000102" "00001000"
            "00010000" "0000" "0000"
            "00000100" "00000100" "8000000000000001" "01000002" "0000" "0003")
# PLANE_STATUS: plane 1 only (port 0 lost carrier).
PLANE_STATUS_HEX = ("16" "00" "01" "00" "00000001" "01000000" "00000000" "00000000"
                    "00000000" "00000000" "0000" "0000"
                    "00000000" "00000000" "0000000000000000" "01000000" "0000" "0002")


@pytest.mark.parametrize("hexdata,kind,reason,port_state", [
    (NACK_HEX, protocol.NACK, protocol.R_TRIMMED_LASTHOP, 0b11),
    (PLANE_STATUS_HEX, protocol.PLANE_STATUS, 0, 0b10),
])
def test_control_vectors_both_ways(hexdata, kind, reason, port_state):
    data = bytes.fromhex(hexdata)
    hdr, ctl, payload = wire.decode(data)
    assert (hdr.type, hdr.reason, ctl.port_state, payload) == (kind, reason, port_state, None)
    assert len(data) == protocol.CONTROL_PACKET_BYTES == 56
    assert wire.encode_control(hdr.type, hdr.flags, hdr.plane, hdr.reason, hdr.conn_id, hdr.ev,
                               hdr.msg_id, hdr.psn, ctl, hdr.offset, hdr.msg_len) == data
    pkt = MRC(data)
    assert (pkt.type, pkt.reason, pkt.plane, pkt.psn) == (kind, reason, hdr.plane, hdr.psn)
    assert pkt[MRCControl].bitmap == ctl.bitmap and pkt[MRCControl].echo_ev == ctl.echo_ev
    assert bytes(pkt) == data


def test_limits_and_constants():
    at_limit = wire.encode_data(0, 0, 1, 1, 0, 0, 0, protocol.MAX_MSG_LEN, b"x")
    assert wire.decode(at_limit)[0].msg_len == protocol.MAX_MSG_LEN
    with pytest.raises(wire.WireError, match="above the limit"):
        wire.decode(wire.encode_data(0, 0, 1, 1, 0, 0, 0, protocol.MAX_MSG_LEN + 1, b"x"))
    with pytest.raises(wire.WireError, match="past the end"):
        wire.decode(wire.encode_data(0, 0, 1, 1, 0, 0, 9, 10, b"xy"))
    assert "DATA flags=LAST" in wire.describe(wire.decode(bytes.fromhex(DATA_HEX))[0])


def test_decode_takes_bytearray_and_memoryview_without_copying_the_payload():
    data = bytearray.fromhex(DATA_HEX)
    _, _, payload = wire.decode(memoryview(data))
    data[-1] = 0
    assert bytes(payload) == bytes.fromhex("deadbe00")  # a view, not a copy


u8, u16, u32 = st.integers(0, 0xFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(flags=u8, plane=u8,
       conn_id=u32, ev=u32, msg_id=u32, psn=u32, payload=st.binary(max_size=64),
       offset=st.integers(0, 1 << 20), extra=st.integers(0, 1000), path_seq=u16)
def test_struct_and_scapy_agree_on_any_data_header(flags, plane, conn_id, ev, msg_id, psn,
                                                   payload, offset, extra, path_seq):
    msg_len = offset + len(payload) + extra
    data = wire.encode_data(flags, plane, conn_id, ev, msg_id, psn, offset, msg_len, payload,
                            path_seq)
    hdr, _, view = wire.decode(data)
    assert hdr == (protocol.DATA, flags, plane, 0, conn_id, ev, msg_id, psn, offset, msg_len,
                   len(payload), path_seq) and bytes(view) == payload
    assert data[30:32] == path_seq.to_bytes(2, "big")  # docs/protocol.md: offset 30
    built = MRC(type=protocol.DATA, flags=flags, plane=plane, conn_id=conn_id, ev=ev,
                msg_id=msg_id, psn=psn, offset=offset, msg_len=msg_len,
                path_seq=path_seq) / payload
    assert bytes(built) == data
    parsed = MRC(data)
    assert (int(parsed.flags), parsed.conn_id, parsed.ev, parsed.payload_len) == (
        flags, conn_id, ev, len(payload))


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(kind=st.sampled_from([protocol.SACK, protocol.NACK, protocol.PROBE, protocol.PROBE_REPLY,
                             protocol.PLANE_STATUS]),
       flags=u8, reason=u8, words=st.tuples(u32, u32, u32, u32, u32, u32),
       ctl=st.tuples(u32, u32, st.integers(0, (1 << 64) - 1), u32, u16, u16))
def test_struct_and_scapy_agree_on_any_control_packet(kind, flags, reason, words, ctl):
    conn_id, ev, msg_id, psn, offset, msg_len = words
    data = wire.encode_control(kind, flags, 2, reason, conn_id, ev, msg_id, psn,
                               wire.Control(*ctl), offset, msg_len)
    hdr, body, _ = wire.decode(data)
    assert body == ctl and (hdr.type, hdr.flags, hdr.reason, hdr.msg_len) == (
        kind, flags, reason, msg_len)
    built = MRC(type=kind, flags=flags, plane=2, reason=reason, conn_id=conn_id, ev=ev,
                msg_id=msg_id, psn=psn, offset=offset, msg_len=msg_len) / MRCControl(
        cum_psn=ctl[0], sack_base=ctl[1], bitmap=ctl[2], echo_ev=ctl[3], ecn_marks=ctl[4],
        port_state=ctl[5])
    assert bytes(built) == data
