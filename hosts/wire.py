"""The MRC wire format (docs/protocol.md) as a fast `struct` codec.

One 32-byte header on every packet; a 24-byte control body behind the header of SACK,
NACK, PROBE, PROBE_REPLY and PLANE_STATUS; the payload behind the header of DATA.
`decode()` raises `WireError` for anything that is not a well-formed MRC packet, so the
agent can count and drop garbage without ever crashing on it.

The data path decodes and encodes every packet, so both are written for speed: the
structs are precompiled, the common case (an untrimmed DATA packet) is tested first,
and the decoded header is a plain tuple subclass built without a Python-level call.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

VERSION = 1
MRC_UDP_PORT = 4793

DATA, SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {DATA: "DATA", SACK: "SACK", NACK: "NACK", PROBE: "PROBE",
              PROBE_REPLY: "PROBE_REPLY", PLANE_STATUS: "PLANE_STATUS"}

F_TRIMMED = 0x01
F_TRIMMED_LASTHOP = 0x02
F_ECN_ECHO = 0x04
F_LAST = 0x08
F_RETRANSMIT = 0x10
FLAG_NAMES = {F_TRIMMED: "TRIMMED", F_TRIMMED_LASTHOP: "TRIMMED_LASTHOP",
              F_ECN_ECHO: "ECN_ECHO", F_LAST: "LAST", F_RETRANSMIT: "RETRANSMIT"}

R_TRIMMED, R_TRIMMED_LASTHOP, R_GAP = 1, 2, 3
REASON_NAMES = {R_TRIMMED: "TRIMMED", R_TRIMMED_LASTHOP: "TRIMMED_LASTHOP", R_GAP: "GAP"}

HEADER = struct.Struct("!BBBBIIIIIIHH")
CONTROL = struct.Struct("!IIQIHH")
HEADER_LEN = HEADER.size  # 32
CONTROL_LEN = CONTROL.size  # 24
CONTROL_PACKET_LEN = HEADER_LEN + CONTROL_LEN  # 56
MAX_PAYLOAD = 0xFFFF  # payload_len is 16 bits
# The largest message a receiver accepts. msg_len is 32 bits on the wire, but the
# receiver allocates the whole buffer when a message's first packet arrives: one forged
# header must not make it allocate gigabytes.
MAX_MSG_LEN = 1 << 28
BITMAP_BITS = 64

_VT_DATA = VERSION << 4 | DATA
_tuple_new = tuple.__new__


class WireError(ValueError):
    """Not a well-formed MRC packet (truncated, foreign, inconsistent)."""


class Header(NamedTuple):
    type: int
    flags: int
    plane: int
    reason: int
    conn_id: int
    ev: int
    msg_id: int
    psn: int
    offset: int
    msg_len: int
    payload_len: int


class Control(NamedTuple):
    cum_psn: int
    sack_base: int
    bitmap: int
    echo_ev: int
    ecn_marks: int
    port_state: int


def encode_data(flags: int, plane: int, conn_id: int, ev: int, msg_id: int, psn: int,
                offset: int, msg_len: int, payload: bytes | memoryview) -> bytes:
    """A DATA packet: header + payload (one copy of the payload)."""
    return HEADER.pack(_VT_DATA, flags, plane, 0, conn_id, ev, msg_id, psn, offset,
                       msg_len, len(payload), 0) + payload


def encode_control(kind: int, flags: int, plane: int, reason: int, conn_id: int, ev: int,
                   msg_id: int, psn: int, control: Control | tuple, offset: int = 0,
                   msg_len: int = 0) -> bytes:
    """A 56-byte control packet (SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS)."""
    return HEADER.pack(VERSION << 4 | kind, flags, plane, reason, conn_id, ev, msg_id, psn,
                       offset, msg_len, 0, 0) + CONTROL.pack(*control)


def decode(data: bytes | bytearray | memoryview, max_msg_len: int = MAX_MSG_LEN
           ) -> tuple[Header, Control | None, memoryview | None]:
    """(header, control body or None, payload or None). Raises WireError.

    The payload is a memoryview into `data` (no copy); a trimmed DATA packet has none.
    """
    size = len(data)
    if size < HEADER_LEN:
        raise WireError(f"truncated: {size} bytes, header needs {HEADER_LEN}")
    (vt, flags, plane, reason, conn_id, ev, msg_id, psn, offset, msg_len, payload_len,
     _) = HEADER.unpack_from(data)
    if vt == _VT_DATA:
        if msg_len > max_msg_len:
            raise WireError(f"DATA msg_len {msg_len} above the limit {max_msg_len}")
        if offset + payload_len > msg_len:
            raise WireError("DATA payload reaches past the end of the message")
        header = _tuple_new(Header, (DATA, flags, plane, reason, conn_id, ev, msg_id, psn,
                                     offset, msg_len, payload_len))
        if flags & F_TRIMMED:
            if size != HEADER_LEN:
                raise WireError("trimmed DATA with payload bytes behind the header")
            return header, None, None
        if size - HEADER_LEN != payload_len:
            raise WireError(f"DATA payload_len {payload_len} but {size - HEADER_LEN} "
                            "bytes present")
        return header, None, memoryview(data)[HEADER_LEN:]
    if vt >> 4 != VERSION:
        raise WireError(f"version {vt >> 4}, expected {VERSION}")
    kind = vt & 0x0F
    if kind not in TYPE_NAMES:
        raise WireError(f"unknown packet type {kind}")
    if size != CONTROL_PACKET_LEN:
        raise WireError(f"{TYPE_NAMES[kind]} must be {CONTROL_PACKET_LEN} bytes, got {size}")
    header = _tuple_new(Header, (kind, flags, plane, reason, conn_id, ev, msg_id, psn, offset,
                                 msg_len, payload_len))
    return header, _tuple_new(Control, CONTROL.unpack_from(data, HEADER_LEN)), None


def trim(data: bytes, last_hop: bool = False) -> bytes:
    """What a trimming switch does to a DATA packet: keep the header, flag it."""
    flags = data[1] | F_TRIMMED | (F_TRIMMED_LASTHOP if last_hop else 0)
    return data[:1] + bytes([flags]) + data[2:HEADER_LEN]


def describe(header: Header) -> str:
    """One line for logs and tools: type, flags, PSN, EV."""
    flags = "|".join(name for bit, name in FLAG_NAMES.items() if header.flags & bit) or "-"
    kind = TYPE_NAMES.get(header.type, str(header.type))
    return (f"{kind} flags={flags} conn={header.conn_id:#x} ev={header.ev:#010x} "
            f"msg={header.msg_id} psn={header.psn} off={header.offset}")
