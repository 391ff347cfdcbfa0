"""Every fact of the MRC protocol that more than one place needs, defined once.

Port, header and frame sizes, packet types, flags, NACK reasons, traffic classes, queue
priorities, the entropy-value (EV) layout and the transport names live here; the codec
(hosts/wire.py), the agents, the topology builders, the tools and the tests import
them. The P4 program cannot import Python, so p4src/include/headers.p4 repeats the
facts a switch needs as `const`s, and tests/unit/test_protocol_facts.py checks each of
them against this module. docs/protocol.md explains them.

This module imports nothing from the project, so anything may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

# --------------------------------------------------------------------- encapsulation
VERSION = 1
# UDP port of every MRC datagram, source and destination. Any free port would do; this
# one sits beside the RoCEv2 port (4791) and is not assigned by IANA.
MRC_UDP_PORT = 4793
# RoCEv2's UDP destination port: the port the fabric's ECMP hashes a baseline flow's
# 5-tuple with (topologies/paths.py ecmp_path).
ROCE_UDP_PORT = 4791

# Socket options of linux/udp.h that Python's socket module does not export: send and
# accept UDP over IPv6 with a zero checksum (docs/protocol.md explains why).
UDP_NO_CHECK6_TX = 101
UDP_NO_CHECK6_RX = 102

ETHERNET_HEADER_BYTES = 14
ETHERNET_MTU = 1500  # the least MTU a port is given
IPV6_HEADER_BYTES = 40
UDP_HEADER_BYTES = 8
MRC_HEADER_BYTES = 32
CONTROL_BODY_BYTES = 24  # behind the header of every packet but DATA
CONTROL_PACKET_BYTES = MRC_HEADER_BYTES + CONTROL_BODY_BYTES
# What the network adds around each MRC datagram (UDP payload) on an Ethernet link.
WIRE_OVERHEAD = ETHERNET_HEADER_BYTES + IPV6_HEADER_BYTES + UDP_HEADER_BYTES

# Payload bytes per DATA packet: the fabric's, which its topology file may set
# (`mtu_payload`, topologies/model.py), by default what fills the IPv6 minimum MTU
# (1,294-byte frames); a scenario may send smaller packets (ProtocolConfig.mtu_payload),
# never larger.
DEFAULT_MTU_PAYLOAD = 1200
# What RoCE and MRC NICs carry: a 4 KiB payload (4,190-byte frames, interfaces of MTU
# 4,176), a topology's `mtu_payload: 4096`.
NIC_MTU_PAYLOAD = 4096
# What a topology's mtu_payload may be: from a quarter of a kilobyte to a payload whose
# frame fits a 9,216-byte jumbo MTU.
MTU_PAYLOAD_RANGE = (256, 9000)
# The largest payload of one DATA packet: the IPv6 payload length (16 bits) covers the
# UDP header, the MRC header and the payload.
MAX_PAYLOAD = 0xFFFF - UDP_HEADER_BYTES - MRC_HEADER_BYTES
# The largest message a receiver accepts. msg_len is 32 bits on the wire, but the
# receiver allocates the whole buffer when a message's first packet arrives: one forged
# header must not make it allocate gigabytes.
MAX_MSG_LEN = 1 << 28
BITMAP_BITS = 64  # PSNs one SACK bitmap covers


def frame_bytes(datagram_bytes: int) -> int:
    """The Ethernet frame that carries an MRC datagram (header and body) of this size."""
    return datagram_bytes + WIRE_OVERHEAD


def data_frame_bytes(mtu_payload: int) -> int:
    """A full DATA frame for this payload size."""
    return frame_bytes(MRC_HEADER_BYTES + mtu_payload)


def interface_mtu(mtu_payload: int) -> int:
    """The interface MTU (IPv6 packet bytes) a fabric's ports need so that a full DATA
    packet leaves whole; never below Ethernet's 1,500."""
    return max(ETHERNET_MTU, data_frame_bytes(mtu_payload) - ETHERNET_HEADER_BYTES)


def largest_frame_bytes(data_frame: int) -> int:
    """The largest frame a port carries, for a fabric whose full DATA frame is
    `data_frame` bytes: its interface MTU and the Ethernet header."""
    return max(ETHERNET_MTU + ETHERNET_HEADER_BYTES, data_frame)


# A full DATA frame at the default payload: the frame whose packet rate matches a
# link's bit rate when switches count their queues in packets.
DATA_FRAME_BYTES = data_frame_bytes(DEFAULT_MTU_PAYLOAD)
# What a trimming switch keeps of a DATA packet by default, and the least it may keep:
# every header up to MRC's, which is what the receiver needs to NACK it. A topology may
# keep more (`trim_size_bytes`, as SONiC's trimming `size`).
TRIMMED_FRAME_BYTES = frame_bytes(MRC_HEADER_BYTES)
# IPv6 payload length and UDP length of a packet trimmed to TRIMMED_FRAME_BYTES.
TRIMMED_L4_BYTES = UDP_HEADER_BYTES + MRC_HEADER_BYTES
# The frame of every packet but DATA (a SACK, a NACK, a probe, a RoCE ack, a CNP).
CONTROL_FRAME_BYTES = frame_bytes(CONTROL_PACKET_BYTES)

# --------------------------------------------------------------------- header values
DATA, SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS = 1, 2, 3, 4, 5, 6
# The RoCE baseline's congestion notification (DCQCN's CNP): its receiver sends one for
# a CE-marked packet, at most one per queue pair and `cnp_interval_s`.
CNP = 7
TYPE_NAMES = {DATA: "DATA", SACK: "SACK", NACK: "NACK", PROBE: "PROBE",
              PROBE_REPLY: "PROBE_REPLY", PLANE_STATUS: "PLANE_STATUS", CNP: "CNP"}

# Bits 0x01 and 0x02 are reserved: a switch writes nothing in this header (a trimmed
# packet is told by its DSCP, below).
F_ECN_ECHO = 0x04
F_LAST = 0x08
F_RETRANSMIT = 0x10
# SACK: the receiver judges the echoed EV persistently bad (the M field of MRC's SACK).
F_ALWAYS_SKIP = 0x20
FLAG_NAMES = {F_ECN_ECHO: "ECN_ECHO", F_LAST: "LAST", F_RETRANSMIT: "RETRANSMIT",
              F_ALWAYS_SKIP: "ALWAYS_SKIP"}
# A DATA packet's `path_seq` (header offset 30, 16 bits): the index of its path within
# its plane (the EV's choice modulo the plane's path count) in the high byte, and how many
# DATA packets the connection sent on that path before it in the low byte (both modulo
# 256), so the receiver sees which packets of a path are missing. Zero in control packets.
PATH_SEQ_SHIFT = 8
PATH_SEQ_MASK = 0xFF


# A PROBE whose PSN has this bit set asks about one late packet (hosts/loss_detection.py):
# its `path_seq` is that packet's, and it travels in the data queue (SUSPECT_PROBE_CLASS,
# never trimmed), behind the packet if the packet is still queued. The PROBE_REPLY
# carries ALWAYS_SKIP if the receiver never saw that `path_seq` on its path: the probe
# passed where the packet should have been, so the path lost it.
SUSPECT_SEQ = 1 << 31
SUSPECT_SEQ_MASK = SUSPECT_SEQ - 1


def make_path_seq(path: int, seq: int) -> int:
    return (path & PATH_SEQ_MASK) << PATH_SEQ_SHIFT | (seq & PATH_SEQ_MASK)


def path_seq_path(path_seq: int) -> int:
    return path_seq >> PATH_SEQ_SHIFT & PATH_SEQ_MASK


def path_seq_seq(path_seq: int) -> int:
    return path_seq & PATH_SEQ_MASK

R_TRIMMED, R_TRIMMED_LASTHOP, R_GAP = 1, 2, 3
REASON_NAMES = {R_TRIMMED: "TRIMMED", R_TRIMMED_LASTHOP: "TRIMMED_LASTHOP", R_GAP: "GAP"}

# --------------------------------------------------------------------- traffic classes
# The IPv6 traffic class is DSCP (top six bits) and ECN (low two bits).
ECN_NOT_ECT = 0b00
ECN_ECT0 = 0b10
ECN_CE = 0b11
ECN_MASK = 0b11


def traffic_class(dscp: int, ecn: int) -> int:
    """The IPv6 traffic class byte of a DSCP and an ECN code point."""
    return dscp << 2 | ecn


# A switch sees a packet through its DSCP alone (docs/protocol.md "Traffic classes"): it
# reads no further than the UDP header and writes nothing in MRC's. The classes are
# those of the OCP MRC spec and UEC 1.0, plus the RoCE baseline's; their code points
# are the operator's (a topology's `traffic_classes`), these by default:
CONTROL, TRIMMABLE, TRIMMABLE_RETX, NO_TRIM, TRIMMED, TRIMMED_LASTHOP, ROCE, ROCE_CNP = range(8)
CLASS_NAMES = ("control", "trimmable", "trimmable_retx", "no_trim", "trimmed",
               "trimmed_lasthop", "roce", "roce_cnp")
DEFAULT_DSCP = (
    46,  # control: SACK, NACK, probes and their replies, PLANE_STATUS (EF)
    10,  # trimmable: MRC data a switch may trim (AF11)
    12,  # trimmable_retx: MRC retransmissions, trimmable too (AF12)
    0,  # no_trim: data that asked not to be trimmed (best effort)
    51,  # trimmed: a header trimmed in the fabric (local use, RFC 2474 pool 2)
    55,  # trimmed_lasthop: a header trimmed on a port facing a host (local use)
    26,  # roce: the RoCE baseline's data and acks, lossless (AF31, common for RoCEv2)
    48,  # roce_cnp: DCQCN's congestion notifications (CS6, common for CNPs)
)
# What a switch does with each class (its whole behaviour, p4src/ and ebpf/):
# - BEHAVIOUR_PRIORITY: the strict-priority queue, never trimmed, never marked;
# - BEHAVIOUR_TRIMMABLE: the data queue, ECN on fabric ports, trimmed above the trim threshold;
# - BEHAVIOUR_BEST_EFFORT: the data queue, ECN on fabric ports, dropped when the queue is full
#   (also every DSCP the topology does not name);
# - BEHAVIOUR_LOSSLESS: its own queue, ECN at every hop (DCQCN needs the last hop's), never
#   dropped: PFC pauses the sender instead (docs/protocol.md "The RoCE baseline").
BEHAVIOUR_BEST_EFFORT, BEHAVIOUR_TRIMMABLE, BEHAVIOUR_PRIORITY, BEHAVIOUR_LOSSLESS = range(4)
BEHAVIOUR_NAMES = ("best_effort", "trimmable", "priority", "lossless")
CLASS_BEHAVIOUR = (BEHAVIOUR_PRIORITY, BEHAVIOUR_TRIMMABLE, BEHAVIOUR_TRIMMABLE,
                   BEHAVIOUR_BEST_EFFORT, BEHAVIOUR_PRIORITY, BEHAVIOUR_PRIORITY,
                   BEHAVIOUR_LOSSLESS, BEHAVIOUR_PRIORITY)
# The class of a PROBE that asks about a late packet (SUSPECT_SEQ): the data queue, in
# order behind the packet, and never trimmed (a trimmed probe would overtake it).
SUSPECT_PROBE_CLASS = NO_TRIM

# Strict-priority queues of a switch port (BMv2 --priority-queues 8 serves 7 first): the
# priority class rides the highest, the lossless class the next, data the lowest.
# BMv2 paces a queue in packets, not bytes, so the lossless class's short frames (the
# RoCE acks, which ride their data's class) take a queue of their own, paced in short
# frames (PRIORITY_LOSSLESS_SHORT: up to CONTROL_FRAME_BYTES): in the data's queue each
# ack took a full frame's time, and a port that carries one connection's data and
# another's acks, as every port of a ring does, gave the data half the link.
PRIORITY_QUEUES = 8
PRIORITY_DATA = 0
PRIORITY_LOSSLESS = 3
PRIORITY_LOSSLESS_SHORT = 4
PRIORITY_CONTROL = 7

# --------------------------------------------------------------------- transports
# `mrc`: the full protocol. `mrc-no-trim`: its data asks switches not to trim it
# (DSCP_NO_TRIM), so congestion drops instead. `mrc-no-probe`: retired paths are never
# probed, so they never come back. `roce`, `roce-8`, `roce-16`: the RoCE baseline of
# hosts/baseline.py with 1, 8 or 16 queue pairs per connection, PFC and DCQCN, as the
# MRC paper ran it (section 5.2.7; `roce-2` and `roce-4` fill in its QP-scaling sweep,
# Fig. 16: "little gain beyond 8 QPs"); `single-path` is the 1-QP baseline under its older
# name. `-pfc` (`roce-8-pfc`): PFC alone, no DCQCN (the paper's appendix compares
# both). The baseline runs on the single-plane twin of the fabric
# (experiments/dataplanes/twin.py); `@planes` (`roce-8@planes`) runs it on the multi-plane fabric
# itself, each queue pair bound to one NIC port.
MRC_TRANSPORTS = ("mrc", "mrc-no-trim", "mrc-no-probe")
# Queue pairs per connection of each baseline transport, by its base name.
BASELINE_QPS = {"roce": 1, "roce-2": 2, "roce-4": 4, "roce-8": 8, "roce-16": 16,
                "single-path": 1}
PFC_ONLY = "-pfc"
ON_PLANES = "@planes"
TRANSPORTS = MRC_TRANSPORTS + tuple(
    f"{base}{pfc}{where}" for where in ("", ON_PLANES) for base in BASELINE_QPS
    for pfc in ("", PFC_ONLY) if not (pfc and base == "single-path"))


@dataclass(frozen=True)
class TransportSpec:
    """What a transport's name says (TRANSPORTS)."""

    name: str
    qps: int  # queue pairs per connection; 0 for MRC
    dcqcn: bool = False  # the baseline's rate control on ECN marks
    trims: bool = False  # switches may trim its data (DSCP_TRIMMABLE)
    probes: bool = False  # MRC probes retired paths
    on_twin: bool = False  # runs on the single-plane twin of the fabric

    @property
    def baseline(self) -> bool:
        return self.qps > 0

    @property
    def data_class(self) -> int:
        """The traffic class of its DATA packets. The baseline stands for RoCE on an ECMP
        fabric, whose switches never trim it and mark it at every hop (ROCE);
        mrc-no-trim is MRC without trimming, so it keeps MRC's ECN rule (NO_TRIM)."""
        if self.baseline:
            return ROCE
        return TRIMMABLE if self.trims else NO_TRIM

    @property
    def retransmit_class(self) -> int:
        """The class of a retransmission: MRC's own trimmable class for them."""
        return TRIMMABLE_RETX if self.trims else self.data_class

    @property
    def control_class(self) -> int:
        """The class of its answers: MRC's control class; a RoCE ack rides its data's."""
        return ROCE if self.baseline else CONTROL


def transport_spec(name: str) -> TransportSpec:
    """The spec of a transport name; ValueError for a name not in TRANSPORTS."""
    if name not in TRANSPORTS:
        raise ValueError(f"unknown transport {name!r}; use one of {', '.join(TRANSPORTS)}")
    if name in MRC_TRANSPORTS:
        return TransportSpec(name, 0, trims=name != "mrc-no-trim",
                             probes=name != "mrc-no-probe")
    base, on_planes = name.removesuffix(ON_PLANES), name.endswith(ON_PLANES)
    pfc_only = base.endswith(PFC_ONLY)
    return TransportSpec(name, BASELINE_QPS[base.removesuffix(PFC_ONLY)], dcqcn=not pfc_only,
                         on_twin=not on_planes)


# A baseline packet's PSN: the queue pair in the top 8 bits, its sequence number in the
# low 24 (RoCE's BTH PSN is 24 bits too), so each QP has a go-back-N sequence of its own
# on one connection id.
QP_PSN_SHIFT = 24
QP_SEQ_MASK = (1 << QP_PSN_SHIFT) - 1
MAX_QPS = 1 << (32 - QP_PSN_SHIFT)
# The conn_id of an endpoint's EV probe (the control API's EP_OP_EV_PROBE,
# hosts/mrc_ctl.py): no connection's, since a connection's conn_id is
# `sender << 16 | receiver` of two different hosts, never 0. The probe's PSN carries the
# request id, which the PROBE_REPLY echoes.
EP_PROBE_CONN = 0
# --------------------------------------------------------------------- entropy values
# A 32-bit EV: the plane in the top 8 bits, the choice among the plane's paths below
# (topologies/paths.py maps a choice to a path, modulo the plane's path count).
EV_PLANE_SHIFT = 24
EV_PLANE_MASK = 0xFF
EV_CHOICE_MASK = (1 << EV_PLANE_SHIFT) - 1


def make_ev(plane: int, choice: int) -> int:
    """The EV of `choice` in `plane` (choice bits beyond the field are dropped)."""
    return plane << EV_PLANE_SHIFT | (choice & EV_CHOICE_MASK)


def ev_plane(ev: int) -> int:
    return ev >> EV_PLANE_SHIFT & EV_PLANE_MASK


def ev_choice(ev: int) -> int:
    return ev & EV_CHOICE_MASK


# --------------------------------------------------------------------- link rates
def link_pps(rate_mbit: float, frame: int) -> float:
    """How many frames of `frame` bytes a link of `rate_mbit` Mbit/s carries a second."""
    return rate_mbit * 1e6 / 8 / frame


def link_mbit(pps: float, frame: int) -> float:
    """The link rate in Mbit/s that carries `pps` frames of `frame` bytes a second."""
    return pps * frame * 8 / 1e6
