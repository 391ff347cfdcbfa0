"""The MRC header as scapy layers, for tools, tests and packet captures.

Field for field the layout of docs/protocol.md (the struct codec in hosts/wire.py is
the fast path; both are checked against the same byte vectors in the tests). `MRC` is
bound to the MRC UDP port; `MRCControl` follows the header of every non-DATA packet.
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
from scapy.packet import Packet, bind_layers

from hosts import protocol

TYPES = dict(protocol.TYPE_NAMES)
# Bit i of the flags byte, by the protocol's names; unassigned bits are F<i>.
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
