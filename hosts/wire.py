"""The MRC wire format (docs/protocol.md) as a fast `struct` codec.

One 32-byte header on every packet; a 24-byte control body behind the header of SACK,
NACK, PROBE, PROBE_REPLY and PLANE_STATUS; the payload behind the header of DATA.
`decode()` raises `WireError` for anything that is not a well-formed MRC packet, so the
agent can count and drop garbage without ever crashing on it.
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

R_TRIMMED, R_TRIMMED_LASTHOP, R_GAP = 1, 2, 3

HEADER = struct.Struct("!BBBBIIIIIIHH")
CONTROL = struct.Struct("!IIQIHH")
HEADER_LEN = HEADER.size  # 32
CONTROL_LEN = CONTROL.size  # 24
_VT_DATA = VERSION << 4 | DATA


class WireError(ValueError):
    """Not a well-formed MRC packet."""


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
    return HEADER.pack(_VT_DATA, flags, plane, 0, conn_id, ev, msg_id, psn, offset,
                       msg_len, len(payload), 0) + payload


def encode_control(kind: int, flags: int, plane: int, reason: int, conn_id: int, ev: int,
                   msg_id: int, psn: int, control: Control, offset: int = 0,
                   msg_len: int = 0) -> bytes:
    return HEADER.pack(VERSION << 4 | kind, flags, plane, reason, conn_id, ev, msg_id, psn,
                       offset, msg_len, 0, 0) + CONTROL.pack(*control)


def decode(data: bytes) -> tuple[Header, Control | None, memoryview | None]:
    """(header, control body or None, payload or None). Raises WireError."""
    if len(data) < HEADER_LEN:
        raise WireError(f"truncated: {len(data)} bytes, header needs {HEADER_LEN}")
    (vt, flags, plane, reason, conn_id, ev, msg_id, psn, offset, msg_len, payload_len,
     _) = HEADER.unpack_from(data)
    if vt >> 4 != VERSION:
        raise WireError(f"version {vt >> 4}, expected {VERSION}")
    kind = vt & 0x0F
    header = Header(kind, flags, plane, reason, conn_id, ev, msg_id, psn, offset, msg_len,
                    payload_len)
    if kind == DATA:
        body = len(data) - HEADER_LEN
        if flags & F_TRIMMED:
            if body:
                raise WireError("trimmed DATA with payload bytes behind the header")
            return header, None, None
        if body != payload_len:
            raise WireError(f"DATA payload_len {payload_len} but {body} bytes present")
        if offset + payload_len > msg_len:
            raise WireError("DATA payload reaches past the end of the message")
        return header, None, memoryview(data)[HEADER_LEN:]
    if kind not in TYPE_NAMES:
        raise WireError(f"unknown packet type {kind}")
    if len(data) != HEADER_LEN + CONTROL_LEN:
        raise WireError(f"{TYPE_NAMES[kind]} must be {HEADER_LEN + CONTROL_LEN} bytes, "
                        f"got {len(data)}")
    return header, Control(*CONTROL.unpack_from(data, HEADER_LEN)), None


def trim(data: bytes, last_hop: bool = False) -> bytes:
    """What a trimming switch does to a DATA packet: keep the header, flag it."""
    flags = data[1] | F_TRIMMED | (F_TRIMMED_LASTHOP if last_hop else 0)
    return data[:1] + bytes([flags]) + data[2:HEADER_LEN]
