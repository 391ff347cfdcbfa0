"""The wire format: struct codec and scapy layer agree on the same byte vectors."""

from __future__ import annotations

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from hosts import wire
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
    assert hdr == wire.Header(wire.DATA, wire.F_LAST, 3, 0, 0x00010002, 0x03000001, 7, 9,
                              2400, 3000, 4)
    assert ctl is None and bytes(payload) == bytes.fromhex("deadbeef")
    assert wire.encode_data(wire.F_LAST, 3, 0x00010002, 0x03000001, 7, 9, 2400, 3000,
                            bytes.fromhex("deadbeef")) == data


def test_data_vector_scapy():
    data = bytes.fromhex(DATA_HEX)
    pkt = MRC(data)
    assert (pkt.type, pkt.plane, pkt.conn_id, pkt.ev, pkt.psn, pkt.offset) == (
        wire.DATA, 3, 0x00010002, 0x03000001, 9, 2400)
    assert pkt.flags.LAST and not pkt.flags.TRIMMED
    assert bytes(pkt.payload) == bytes.fromhex("deadbeef")
    built = MRC(type=wire.DATA, flags="LAST", plane=3, conn_id=0x00010002, ev=0x03000001,
                msg_id=7, psn=9, offset=2400, msg_len=3000) / bytes.fromhex("deadbeef")
    assert bytes(built) == data  # payload_len computed in post_build


def test_sack_vector_both_ways():
    data = bytes.fromhex(SACK_HEX)
    hdr, ctl, _ = wire.decode(data)
    assert hdr.type == wire.SACK and hdr.flags == wire.F_ECN_ECHO
    assert ctl == wire.Control(5, 5, 0b101, 0x03000001, 1, 0xFF)
    assert wire.encode_control(wire.SACK, wire.F_ECN_ECHO, 3, 0, 0x00010002, 0x03000001, 7, 9,
                               ctl) == data
    pkt = MRC(data)
    assert pkt[MRCControl].bitmap == 0b101 and pkt[MRCControl].port_state == 0xFF
    assert bytes(pkt) == data


def test_trimmed_packet_is_the_header_alone():
    data = bytes.fromhex(DATA_HEX)
    trimmed = wire.trim(data, last_hop=True)
    assert len(trimmed) == wire.HEADER_LEN == 32
    hdr, _, payload = wire.decode(trimmed)
    assert hdr.flags & wire.F_TRIMMED and hdr.flags & wire.F_TRIMMED_LASTHOP
    assert hdr.payload_len == 4 and payload is None
    assert MRC(trimmed).flags.TRIMMED


def test_scapy_stacks_on_ipv6_udp():
    frame = IPv6(dst="fcbb:bb00:1000:8001::") / UDP(sport=4793, dport=4793) / MRC(
        bytes.fromhex(SACK_HEX))
    parsed = IPv6(bytes(frame))
    assert parsed[MRC].type == wire.SACK and parsed[MRCControl].cum_psn == 5


@pytest.mark.parametrize("data,match", [
    (b"", "truncated"),
    (bytes.fromhex(DATA_HEX)[:31], "truncated"),
    (b"\x21" + bytes.fromhex(DATA_HEX)[1:], "version 2"),
    (b"\x19" + bytes.fromhex(DATA_HEX)[1:], "unknown packet type 9"),
    (bytes.fromhex(DATA_HEX)[:-1], "payload_len 4 but 3"),
    (bytes.fromhex(SACK_HEX)[:-2], "must be 56 bytes"),
    (wire.trim(bytes.fromhex(DATA_HEX)) + b"x", "trimmed DATA with payload"),
])
def test_garbage_raises_wire_error(data, match):
    with pytest.raises(wire.WireError, match=match):
        wire.decode(data)
