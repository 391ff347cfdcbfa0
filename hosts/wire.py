"""The MRC wire format (docs/protocol.md) as a fast `struct` codec.

One 32-byte header on every packet; a 24-byte control body behind the header of SACK,
NACK, PROBE, PROBE_REPLY, PLANE_STATUS and CNP; the payload behind the header of DATA.
`decode()` raises `WireError` for anything that is not a well-formed MRC packet, so the
agent can count and drop garbage without ever crashing on it.

The data path decodes and encodes every packet, so both are written for speed: the
structs are precompiled, the common case (an untrimmed DATA packet) is tested first,
and the decoded header is a plain tuple subclass built without a Python-level call.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from hosts.protocol import (
    CONTROL_PACKET_BYTES,
    DATA,
    FLAG_NAMES,
    MAX_MSG_LEN,
    MRC_HEADER_BYTES,
    TYPE_NAMES,
    VERSION,
)

# The layouts of docs/protocol.md; their sizes are MRC_HEADER_BYTES and
# CONTROL_BODY_BYTES (tests/unit/test_protocol_facts.py checks that they agree).
HEADER = struct.Struct("!BBBBIIIIIIHH")
CONTROL_BODY = struct.Struct("!IIQIHH")

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
    path_seq: int = 0  # DATA: its path and sequence number on it (docs/protocol.md)


class Control(NamedTuple):
    cum_psn: int
    sack_base: int
    bitmap: int
    echo_ev: int
    ecn_marks: int
    port_state: int


def encode_data(flags: int, plane: int, conn_id: int, ev: int, msg_id: int, psn: int,
                offset: int, msg_len: int, payload: bytes | memoryview,
                path_seq: int = 0) -> bytes:
    """A DATA packet: header + payload (one copy of the payload)."""
    return HEADER.pack(_VT_DATA, flags, plane, 0, conn_id, ev, msg_id, psn, offset,
                       msg_len, len(payload), path_seq) + payload


def encode_control(kind: int, flags: int, plane: int, reason: int, conn_id: int, ev: int,
                   msg_id: int, psn: int, control: Control | tuple, offset: int = 0,
                   msg_len: int = 0, path_seq: int = 0) -> bytes:
    """A 56-byte control packet (SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS, CNP);
    `path_seq` only in a PROBE about a late packet (hosts/protocol.py SUSPECT_SEQ)."""
    return HEADER.pack(VERSION << 4 | kind, flags, plane, reason, conn_id, ev, msg_id, psn,
                       offset, msg_len, 0, path_seq) + CONTROL_BODY.pack(*control)


def decode(data: bytes | bytearray | memoryview, max_msg_len: int = MAX_MSG_LEN,
           trimmed: bool = False) -> tuple[Header, Control | None, memoryview | None]:
    """(header, control body or None, payload or None). Raises WireError.

    The payload is a memoryview into `data` (no copy). A DATA packet that arrived in a
    trimmed class (its DSCP says so: `trimmed`) has none: a switch cut it to its
    configured size, somewhere between its header and its whole payload.
    """
    size = len(data)
    if size < MRC_HEADER_BYTES:
        raise WireError(f"truncated: {size} bytes, header needs {MRC_HEADER_BYTES}")
    (vt, flags, plane, reason, conn_id, ev, msg_id, psn, offset, msg_len, payload_len,
     path_seq) = HEADER.unpack_from(data)
    if vt == _VT_DATA:
        if msg_len > max_msg_len:
            raise WireError(f"DATA msg_len {msg_len} above the limit {max_msg_len}")
        if offset + payload_len > msg_len:
            raise WireError("DATA payload reaches past the end of the message")
        header = _tuple_new(Header, (DATA, flags, plane, reason, conn_id, ev, msg_id, psn,
                                     offset, msg_len, payload_len, path_seq))
        if trimmed:
            if size - MRC_HEADER_BYTES > payload_len:
                raise WireError("trimmed DATA longer than the packet it was cut from")
            return header, None, None
        if size - MRC_HEADER_BYTES != payload_len:
            raise WireError(f"DATA payload_len {payload_len} but {size - MRC_HEADER_BYTES} "
                            "bytes present")
        return header, None, memoryview(data)[MRC_HEADER_BYTES:]
    if vt >> 4 != VERSION:
        raise WireError(f"version {vt >> 4}, expected {VERSION}")
    kind = vt & 0x0F
    if kind not in TYPE_NAMES:
        raise WireError(f"unknown packet type {kind}")
    if size != CONTROL_PACKET_BYTES:
        raise WireError(f"{TYPE_NAMES[kind]} must be {CONTROL_PACKET_BYTES} bytes, got {size}")
    header = _tuple_new(Header, (kind, flags, plane, reason, conn_id, ev, msg_id, psn, offset,
                                 msg_len, payload_len, path_seq))
    return header, _tuple_new(Control, CONTROL_BODY.unpack_from(data, MRC_HEADER_BYTES)), None


def describe(header: Header) -> str:
    """One line for logs and tools: type, flags, PSN, EV."""
    flags = "|".join(name for bit, name in FLAG_NAMES.items() if header.flags & bit) or "-"
    kind = TYPE_NAMES.get(header.type, str(header.type))
    return (f"{kind} flags={flags} conn={header.conn_id:#x} ev={header.ev:#010x} "
            f"msg={header.msg_id} psn={header.psn} off={header.offset}")
