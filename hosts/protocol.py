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
IPV6_HEADER_BYTES = 40
UDP_HEADER_BYTES = 8
MRC_HEADER_BYTES = 32
CONTROL_BODY_BYTES = 24  # behind the header of every packet but DATA
CONTROL_PACKET_BYTES = MRC_HEADER_BYTES + CONTROL_BODY_BYTES
# What the network adds around each MRC datagram (UDP payload) on an Ethernet link.
WIRE_OVERHEAD = ETHERNET_HEADER_BYTES + IPV6_HEADER_BYTES + UDP_HEADER_BYTES

# Payload bytes per DATA packet unless a scenario says otherwise (ProtocolConfig).
DEFAULT_MTU_PAYLOAD = 1200
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


# A full DATA frame at the default payload: the frame whose packet rate matches a
# link's bit rate when switches count their queues in packets.
DATA_FRAME_BYTES = frame_bytes(MRC_HEADER_BYTES + DEFAULT_MTU_PAYLOAD)
# What a trimming switch keeps of a DATA packet: every header, no payload.
TRIMMED_FRAME_BYTES = frame_bytes(MRC_HEADER_BYTES)
# IPv6 payload length and UDP length of a trimmed packet.
TRIMMED_L4_BYTES = UDP_HEADER_BYTES + MRC_HEADER_BYTES

# --------------------------------------------------------------------- header values
DATA, SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS = 1, 2, 3, 4, 5, 6
# The RoCE baseline's congestion notification (DCQCN's CNP): its receiver sends one for
# a CE-marked packet, at most one per queue pair and `cnp_interval_s`.
CNP = 7
TYPE_NAMES = {DATA: "DATA", SACK: "SACK", NACK: "NACK", PROBE: "PROBE",
              PROBE_REPLY: "PROBE_REPLY", PLANE_STATUS: "PLANE_STATUS", CNP: "CNP"}

F_TRIMMED = 0x01
F_TRIMMED_LASTHOP = 0x02
F_ECN_ECHO = 0x04
F_LAST = 0x08
F_RETRANSMIT = 0x10
# SACK: the receiver judges the echoed EV persistently bad (the M field of MRC's SACK).
F_ALWAYS_SKIP = 0x20
FLAG_NAMES = {F_TRIMMED: "TRIMMED", F_TRIMMED_LASTHOP: "TRIMMED_LASTHOP",
              F_ECN_ECHO: "ECN_ECHO", F_LAST: "LAST", F_RETRANSMIT: "RETRANSMIT",
              F_ALWAYS_SKIP: "ALWAYS_SKIP"}
# Flags only hosts read: the P4 program does not need them, so p4src/include/headers.p4
# does not repeat them.
HOST_ONLY_FLAGS = frozenset({F_ALWAYS_SKIP})
# A DATA packet's `path_seq` (header offset 30, 16 bits): the index of its path within
# its plane (the EV's choice modulo the plane's path count) in the high byte, and how many
# DATA packets the connection sent on that path before it in the low byte (both modulo
# 256), so the receiver sees which packets of a path are missing. Zero in control packets.
PATH_SEQ_SHIFT = 8
PATH_SEQ_MASK = 0xFF


def make_path_seq(path: int, seq: int) -> int:
    return (path & PATH_SEQ_MASK) << PATH_SEQ_SHIFT | (seq & PATH_SEQ_MASK)


def path_seq_path(path_seq: int) -> int:
    return path_seq >> PATH_SEQ_SHIFT & PATH_SEQ_MASK


def path_seq_seq(path_seq: int) -> int:
    return path_seq & PATH_SEQ_MASK

R_TRIMMED, R_TRIMMED_LASTHOP, R_GAP = 1, 2, 3
REASON_NAMES = {R_TRIMMED: "TRIMMED", R_TRIMMED_LASTHOP: "TRIMMED_LASTHOP", R_GAP: "GAP"}

# --------------------------------------------------------------------- traffic class
# The IPv6 traffic class is DSCP (top six bits) and ECN (low two bits).
ECN_NOT_ECT = 0b00
ECN_ECT0 = 0b10
ECN_CE = 0b11
ECN_MASK = 0b11
# DSCP classes (docs/protocol.md), as a switch configures trimming and ECN per traffic
# class. A switch trims only DATA packets of DSCP_TRIMMABLE. DSCP_NO_TRIM is 0, what
# every unmarked packet carries, so a switch never trims traffic that did not ask for
# it; DSCP_TRIMMABLE is AF11 (10). Both are MRC's classes: no ECN mark on a port facing
# a host, where a mark would say nothing about the path. DSCP_ROCE is AF31 (26), the
# class RoCE deployments commonly give RoCEv2: never trimmed, and marked at every hop,
# the last one included, since DCQCN needs the last hop's marks to slow the senders of
# an incast before the receiver's port overflows.
DSCP_NO_TRIM = 0
DSCP_TRIMMABLE = 10
DSCP_ROCE = 26


def traffic_class(dscp: int, ecn: int) -> int:
    """The IPv6 traffic class byte of a DSCP and an ECN code point."""
    return dscp << 2 | ecn


# Strict-priority queues of a switch port (BMv2 --priority-queues 8 serves 7 first):
# data rides the lowest, control packets and trimmed headers the highest.
PRIORITY_QUEUES = 8
PRIORITY_DATA = 0
PRIORITY_CONTROL = 7

# --------------------------------------------------------------------- transports
# `mrc`: the full protocol. `mrc-no-trim`: its data asks switches not to trim it
# (DSCP_NO_TRIM), so congestion drops instead. `mrc-no-probe`: retired paths are never
# probed, so they never come back. `roce`, `roce-8`, `roce-16`: the RoCE baseline of
# hosts/baseline.py with 1, 8 or 16 queue pairs per connection, PFC and DCQCN, as the
# MRC paper ran it (section 5.2.7); `single-path` is the 1-QP baseline under its older
# name. `-pfc` (`roce-8-pfc`): PFC alone, no DCQCN (the paper's appendix compares
# both). The baseline runs on the single-plane twin of the fabric
# (experiments/twin.py); `@planes` (`roce-8@planes`) runs it on the multi-plane fabric
# itself, each queue pair bound to one NIC port.
MRC_TRANSPORTS = ("mrc", "mrc-no-trim", "mrc-no-probe")
# Queue pairs per connection of each baseline transport, by its base name.
BASELINE_QPS = {"roce": 1, "roce-8": 8, "roce-16": 16, "single-path": 1}
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
    def data_dscp(self) -> int:
        """The DSCP its DATA packets carry. The baseline stands for RoCE on an ECMP
        fabric, whose switches do not trim it and mark it at every hop (DSCP_ROCE);
        mrc-no-trim is MRC without trimming, so it keeps MRC's ECN rule (DSCP_NO_TRIM)."""
        if self.baseline:
            return DSCP_ROCE
        return DSCP_TRIMMABLE if self.trims else DSCP_NO_TRIM


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
# Control packets (SACK, NACK, PROBE...) are never trimmed, whatever the transport.
CONTROL_DSCP = DSCP_NO_TRIM
# Every packet leaves ECT(0), control packets too: a switch marks rather than drops
# (a RED queue drops Not-ECT packets where it would mark), and a CE mark on a control
# packet is simply not looked at.
CONTROL_TRAFFIC_CLASS = traffic_class(CONTROL_DSCP, ECN_ECT0)


def data_traffic_class(transport: str) -> int:
    """The IPv6 traffic class of a transport's DATA packets."""
    return traffic_class(transport_spec(transport).data_dscp, ECN_ECT0)


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
