"""The MRC header as scapy layers, for tools, tests and packet captures.

Field for field the layout of docs/protocol.md (the struct codec in hosts/wire.py is
the fast path; both are checked against the same byte vectors in the tests). `MRC` is
bound to the MRC UDP port; `MRCControl` follows the header of every non-DATA packet.
`trim()` makes of a frame what a trimming switch makes of it, for tests that expect one.
"""

from __future__ import annotations

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    XIntField,
)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, bind_layers

from hosts import protocol

TYPES = dict(protocol.TYPE_NAMES)
# Bit i of the flags byte, by the protocol's names; unassigned bits are F<i>, the
# reserved 0x01 and 0x02 (F0, F1) among them: no switch writes into this header.
FLAG_NAMES = [protocol.FLAG_NAMES.get(1 << i, f"F{i}") for i in range(8)]


class MRC(Packet):
    name = "MRC"
    fields_desc = [
        BitField("version", protocol.VERSION, 4),
        BitEnumField("type", protocol.DATA, 4, TYPES),
        FlagsField("flags", 0, 8, FLAG_NAMES),
        ByteField("plane", 0),
        ByteField("reason", 0),
        XIntField("conn_id", 0),
        XIntField("ev", 0),
        IntField("msg_id", 0),
        IntField("psn", 0),
        IntField("offset", 0),
        IntField("msg_len", 0),
        ShortField("payload_len", None),
        ShortField("path_seq", 0),  # DATA: path index, sequence number on the path
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.payload_len is None:
            length = len(pay) if self.type == protocol.DATA else 0
            pkt = pkt[:28] + length.to_bytes(2, "big") + pkt[30:]
        return pkt + pay

    def mysummary(self) -> str:
        return self.sprintf("MRC %type% %flags% psn=%psn% ev=%ev% plane=%plane%")

    def guess_payload_class(self, payload: bytes):
        if self.type != protocol.DATA:
            return MRCControl
        return Packet.guess_payload_class(self, payload)


class MRCControl(Packet):
    name = "MRC control"
    fields_desc = [
        IntField("cum_psn", 0),
        IntField("sack_base", 0),
        LongField("bitmap", 0),
        XIntField("echo_ev", 0),
        ShortField("ecn_marks", 0),
        ShortField("port_state", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf("cum=%cum_psn% bitmap=%bitmap% echo_ev=%echo_ev% "
                            "ports=%port_state%")


bind_layers(UDP, MRC, dport=protocol.MRC_UDP_PORT)
bind_layers(UDP, MRC, sport=protocol.MRC_UDP_PORT)


def trim(frame: Packet, dscp: int = protocol.DEFAULT_DSCP[protocol.TRIMMED],
         size_bytes: int = protocol.TRIMMED_FRAME_BYTES) -> Packet:
    """What a trimming switch sends of `frame` (Ethernet, IPv6, UDP, MRC): its first
    `size_bytes` bytes, the DSCP rewritten to `dscp` (the port's trimmed class: TRIMMED,
    or TRIMMED_LASTHOP facing a host), the IPv6 payload length and UDP length fixed to
    what is left. The ECN bits and every byte behind the UDP header stay as they were,
    the UDP checksum too (zero, as the agents send it).
    """
    raw = bytes(frame)
    if not protocol.TRIMMED_FRAME_BYTES <= size_bytes < len(raw):
        raise ValueError(f"a switch trims a {len(raw)}-byte frame to a size from "
                         f"{protocol.TRIMMED_FRAME_BYTES} bytes up to below its own length, "
                         f"not {size_bytes}")
    if dscp >> 6:
        raise ValueError(f"DSCP {dscp} does not fit its 6 bits")
    ipv6_at = len(raw) - len(frame[IPv6])
    udp_at = len(raw) - len(frame[UDP])
    cut = frame.__class__(raw[:size_bytes])
    cut[IPv6].tc = protocol.traffic_class(dscp, cut[IPv6].tc & protocol.ECN_MASK)
    cut[IPv6].plen = size_bytes - ipv6_at - protocol.IPV6_HEADER_BYTES
    cut[UDP].len = size_bytes - udp_at
    return cut
