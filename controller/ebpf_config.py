"""What the kernel data plane's eBPF switch program is given: pure, no I/O.

The program (`ebpf/mrc_switch.bpf.c`, docs/ebpf-switch.md) is loaded once and attached
to the tc clsact egress hook of every port of the fabric; its maps are shared and
keyed by the port's interface index. This module owns everything it is told:

- the compiler command, with the facts it needs as `-D` definitions (behaviours,
  counter indexes, PFC event kinds, the Weyl step of its ECN decisions), so the C
  source repeats none of them;
- each port's settings (`struct port_config`), from the same per-port values the P4
  program gets (controller/tables.py `PortRole`: host-facing, ECN thresholds, trim
  threshold and size, queue limit, PFC's XOFF and XON, the trimmed DSCP) plus the
  link's rate, its peer's index and the htb classes; in bytes of full DATA frames, the
  unit of the program's virtual queues;
- what each DSCP means to it (`dscp_class`), the encodings of the fault settings
  (random loss per port, gray loss per destination prefix of a port), and the
  decoding of the counters and of the PFC events;
- the htb set-up of a switch port: a priority class served first, a lossless class and
  a data class sharing the rest.

Map writes are `MapWrite` values (the map by name, key and value bytes);
topologies/ebpf_program.py applies them.
"""

from __future__ import annotations

import math
import struct
import sysconfig
from dataclasses import dataclass
from ipaddress import IPv6Address
from pathlib import Path

from controller.tables import (
    WEYL_STEP,
    PortRole,
    SwitchTables,
    lossless_queue,
    priority_limit,
)
from hosts import protocol
from topologies.model import LinkParams

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "ebpf" / "mrc_switch.bpf.c"
OBJECT = ROOT / "build" / "ebpf" / "mrc_switch.bpf.o"
SECTION = "tc"
# What the object is built from: it is stale when any of these is newer.
BUILD_INPUTS = (SOURCE, Path(__file__), Path(protocol.__file__))

# Map names, as declared in the C program.
PORTS_MAP = "ports"
STATE_MAP = "state"
INGRESS_MAP = "ingress"
CLASS_MAP = "dscp_class"
COUNTERS_MAP = "counters"
LOSS_MAP = "port_loss"
GRAY_MAP = "gray_loss"
EVENTS_MAP = "pfc_events"
MAPS = (PORTS_MAP, STATE_MAP, INGRESS_MAP, CLASS_MAP, COUNTERS_MAP, LOSS_MAP, GRAY_MAP,
        EVENTS_MAP)

# Per-port counters, in the order of their index; the trimming ones have SONiC's names
# (TRIM_PKTS: trimmed here; TX_TRIM_PKTS: trimmed here and sent; DROPPED_TRIM_PKTS:
# trimmed here and dropped, its priority queue full).
COUNTERS = ("forwarded", "trim_pkts", "tx_trim_pkts", "dropped_trim_pkts", "ecn_marked",
            "dropped", "fault_dropped", "pfc_xoff_rx", "pfc_xoff_tx")

# What a port's program does: pass everything (0), be a switch port, or only inject
# faults (a host's port, or on BMv2 a switch end beside the BMv2 process).
MODE_SWITCH, MODE_FAULTS = 1, 2
# The kinds of a PFC event the program puts on its ring.
PFC_XOFF, PFC_XON = 1, 2
# Ingress ports one port's lossless queue keeps apart (a switch's ports at most).
PFC_SLOTS = 16
# How often a lossless queue no packet visits is drained (its XON found).
PFC_TICK_NS = 100_000

# struct port_config and its field names, in order. Maps hold host byte order.
PORT_CONFIG = struct.Struct("=Q13I4B")
PORT_CONFIG_FIELDS = ("rate_bytes_per_s", "ecn_kmin_bytes", "ecn_kmax_bytes", "ecn_pmax",
                      "trim_threshold_bytes", "drop_threshold_bytes", "priority_limit_bytes",
                      "trim_size_bytes", "xoff_bytes", "xon_bytes", "peer_ifindex",
                      "classid_priority", "classid_lossless", "classid_data",
                      "host_facing", "dscp_trimmed", "mode", "pad")
# struct gray_key: prefix length (host order), the port's ifindex and the IPv6
# address (network order): the port's index counts as the prefix's first 32 bits.
GRAY_KEY = struct.Struct("=I4s16s")
# struct pfc_event: kind, ifindex, the port's count of pauses and resumes so far.
PFC_EVENT = struct.Struct("=IIQ")
# The fields of struct port_state user space reads (at their offsets): the paused
# flag and the time paused so far.
STATE_PAUSED = struct.Struct("=4xI")
STATE_PAUSED_TOTAL = struct.Struct("=56xQ")
# ... and its queues: paused, the priority, lossless and data bytes as of last_ns.
STATE_QUEUES = struct.Struct("=4xIQQQQ")
# struct ingress_state: the lossless bytes an ingress port has queued, and whether its
# peer is paused (xoff).
INGRESS_STATE = struct.Struct("=QI")
U32 = struct.Struct("=I")
U64 = struct.Struct("=Q")
# A threshold the 32-bit virtual backlog compares against and never reaches.
NEVER = 0xFFFFFFFF
# The virtual queues drain by (microseconds since the last packet, at most this) x
# rate: the cap keeps the product inside 64 bits and bounds the rate a port accepts.
VQ_MAX_IDLE_USEC = 1_000_000_000
MAX_RATE_BYTES_PER_S = ((1 << 64) - 1) // VQ_MAX_IDLE_USEC
# A loss threshold of 2^32 is above every 32-bit random number: every packet is lost.
LOSS_SCALE = 1 << 32

# The htb set-up of a switch port: one class at the link rate with three leaves that
# borrow all of it. Every leaf is guaranteed only a sliver of the rate, so nearly all
# traffic is borrowed, and htb lends to the lower `prio` first: the priority class
# (control packets, trimmed headers, CNPs) leaves before any queued data. tc reads class
# ids in hex: 1:10 is minor 0x10.
HTB_HANDLE = 0x1
CLASS_LINK = 0x1
CLASS_PRIORITY = 0x10
CLASS_LOSSLESS = 0x30
CLASS_DATA = 0x20
LEAF_RATE_FRACTION = 0.01

# PFC's hold of a switch port's lossless queue (experiments/dataplanes/pfc.py): the
# lossless leaf is a tbf, open at a rate no emulated link reaches (htb above it sets the
# pace), or shut to a trickle while the port's peer has it paused. A tbf refills its
# bucket whenever it is changed, so a resumed queue may send at once, where an htb
# class keeps the token debt it ran up while slowed (docs/ebpf-switch.md "PFC"); the
# shut bucket is one largest frame, the frame a pause lets finish.
GATE_OPEN_BYTES_PER_S = 1_250_000_000  # 10 Gbit/s
GATE_OPEN_BURST_BYTES = 1 << 16
GATE_SHUT_BYTES_PER_S = 8  # a frame every three minutes or so: longer than any pause
# The frame a resume sends on the port, for its qdisc to look at the queue it let go
# (a tbf sets no timer when changed): an IEEE local experimental EtherType, which the
# program lets pass untouched and the peer's kernel drops.
WAKE_ETHERTYPE = 0x88B5


class EbpfConfigError(ValueError):
    """A value the eBPF program cannot be given (out of range, malformed address)."""


def classid(minor: int) -> int:
    """The htb class id of `minor` as skb->priority carries it (major << 16 | minor)."""
    return HTB_HANDLE << 16 | minor


def tc_class(minor: int) -> str:
    """The same class id as tc writes it (hex)."""
    return f"{HTB_HANDLE:x}:{minor:x}"


@dataclass(frozen=True)
class MapWrite:
    """One update of a map of the program; value None deletes the key."""

    map_name: str
    key: bytes
    value: bytes | None


def key(ifindex: int) -> bytes:
    return U32.pack(ifindex)


@dataclass(frozen=True)
class PortConfig:
    """The program's settings of one port (struct port_config)."""

    rate_bytes_per_s: int
    ecn_kmin_bytes: int = NEVER
    ecn_kmax_bytes: int = NEVER
    ecn_pmax: int = 0
    trim_threshold_bytes: int = NEVER
    drop_threshold_bytes: int = NEVER
    priority_limit_bytes: int = NEVER
    trim_size_bytes: int = protocol.TRIMMED_FRAME_BYTES
    xoff_bytes: int = NEVER
    xon_bytes: int = NEVER
    peer_ifindex: int = 0
    host_facing: bool = False
    dscp_trimmed: int = 0
    mode: int = MODE_FAULTS
    classid_priority: int = classid(CLASS_PRIORITY)
    classid_lossless: int = classid(CLASS_LOSSLESS)
    classid_data: int = classid(CLASS_DATA)

    def encode(self) -> bytes:
        for name in PORT_CONFIG_FIELDS[1:11]:
            if not 0 <= getattr(self, name) <= NEVER:
                raise EbpfConfigError(f"{name}: must fit 32 bits (got {getattr(self, name)})")
        if not 1 <= self.rate_bytes_per_s <= MAX_RATE_BYTES_PER_S:
            raise EbpfConfigError(f"rate_bytes_per_s: must be 1..{MAX_RATE_BYTES_PER_S} "
                                  f"(got {self.rate_bytes_per_s})")
        if self.ecn_kmax_bytes < self.ecn_kmin_bytes:
            raise EbpfConfigError("ecn_kmax_bytes: must not be below ecn_kmin_bytes")
        return PORT_CONFIG.pack(*(int(getattr(self, name)) for name in PORT_CONFIG_FIELDS[:-1]),
                                0)

    def write(self, ifindex: int) -> MapWrite:
        return MapWrite(PORTS_MAP, key(ifindex), self.encode())


def rate_bytes_per_s(link: LinkParams) -> int:
    return max(1, round(link.rate_mbit * 1e6 / 8))


def port_config(tables: SwitchTables, role: PortRole, link: LinkParams,
                peer_ifindex: int = 0) -> PortConfig:
    """A switch port's settings: the values the P4 program gets, in bytes of the
    fabric's full frames (the priority queue's limit in trimmed headers), and the link
    rate."""
    frame_bytes = tables.frame_bytes
    return PortConfig(
        rate_bytes_per_s=rate_bytes_per_s(link),
        ecn_kmin_bytes=role.ecn_kmin * frame_bytes,
        ecn_kmax_bytes=role.ecn_kmax * frame_bytes,
        ecn_pmax=role.ecn_pmax,
        trim_threshold_bytes=role.trim_threshold * frame_bytes,
        drop_threshold_bytes=role.queue * frame_bytes,
        priority_limit_bytes=role.priority_limit * tables.trim_size_bytes,
        trim_size_bytes=tables.trim_size_bytes,
        xoff_bytes=role.xoff * frame_bytes,
        xon_bytes=role.xon * frame_bytes,
        peer_ifindex=peer_ifindex,
        host_facing=role.host_facing,
        dscp_trimmed=role.dscp_trimmed,
        mode=MODE_SWITCH,
    )


def faults_only_config(link: LinkParams, peer_ifindex: int = 0) -> PortConfig:
    """A port that only injects faults (a host's, say): it never marks, trims or drops
    by itself; it can still be paused by its peer's PFC (a host's NIC port)."""
    return PortConfig(rate_bytes_per_s(link), peer_ifindex=peer_ifindex, mode=MODE_FAULTS)


def class_writes(tables: SwitchTables) -> list[MapWrite]:
    """What each DSCP the topology names means to the switch; the others stay 0, best
    effort."""
    return [MapWrite(CLASS_MAP, U32.pack(dscp), U32.pack(behaviour))
            for dscp, behaviour in sorted(tables.dscp_behaviour.items())]


def fresh_state_writes(ifindex: int, sizes: dict[str, int]) -> list[MapWrite]:
    """A port's state, ingress account and counters, all zero (`sizes`: the maps'
    value sizes, as the loaded object declares them)."""
    return [MapWrite(name, key(ifindex), bytes(sizes[name]))
            for name in (STATE_MAP, INGRESS_MAP, COUNTERS_MAP)]


def loss_threshold(probability: float) -> int:
    """The program's encoding of a loss probability: lost when prandom_u32 < threshold."""
    if not 0.0 <= probability <= 1.0 or math.isnan(probability):
        raise EbpfConfigError(f"loss probability: must be between 0 and 1 (got {probability})")
    return round(probability * LOSS_SCALE)


def loss_write(ifindex: int, probability: float) -> MapWrite:
    """Random loss of every packet the port sends (0 clears it)."""
    return MapWrite(LOSS_MAP, key(ifindex), U64.pack(loss_threshold(probability)))


def gray_key(ifindex: int, address: str, prefix_len: int = 128) -> bytes:
    """The key of a destination prefix on a port: the IPv6 destination as it leaves
    the port (the uSID list after this switch's shift), or its first `prefix_len` bits."""
    try:
        packed = IPv6Address(address).packed
    except ValueError as err:
        raise EbpfConfigError(f"gray loss address: {err}") from None
    if not 0 <= prefix_len <= 128:
        raise EbpfConfigError(f"gray loss prefix length: must be 0..128 (got {prefix_len})")
    return GRAY_KEY.pack(32 + prefix_len, ifindex.to_bytes(4, "big"), packed)


# Maps whose key starts with a port's ifindex (host byte order), and the gray-loss map,
# whose key holds it after the prefix length (network byte order): every other map's
# entries (classes by DSCP) concern every port.
PORT_KEYED = (PORTS_MAP, STATE_MAP, INGRESS_MAP, COUNTERS_MAP, LOSS_MAP)


def port_of(op: MapWrite) -> int | None:
    """The ifindex of the port a map write concerns, or None when it concerns every
    port (a fabric split across servers writes it only where that port is)."""
    if op.map_name in PORT_KEYED:
        return U32.unpack_from(op.key)[0]
    if op.map_name == GRAY_MAP:
        return int.from_bytes(GRAY_KEY.unpack(op.key)[1], "big")
    return None


def gray_loss_write(ifindex: int, address: str, probability: float,
                    prefix_len: int = 128) -> MapWrite:
    """Lose `probability` of the packets to a destination prefix (one path, gray)."""
    return MapWrite(GRAY_MAP, gray_key(ifindex, address, prefix_len),
                    U64.pack(loss_threshold(probability)))


def gray_loss_clear(ifindex: int, address: str, prefix_len: int = 128) -> MapWrite:
    return MapWrite(GRAY_MAP, gray_key(ifindex, address, prefix_len), None)


def decode_counters(value: bytes) -> dict[str, int]:
    """A port's counters value (struct counters) -> {name: packets}."""
    if len(value) != 8 * len(COUNTERS):
        raise EbpfConfigError(f"counters: expected {8 * len(COUNTERS)} bytes, got {len(value)}")
    return dict(zip(COUNTERS, struct.unpack(f"={len(COUNTERS)}Q", value)))


@dataclass(frozen=True)
class QueueNow:
    """What a port's virtual queues hold at a moment (bytes), and whether its lossless
    queue is paused."""

    priority: int
    lossless: int
    data: int
    paused: bool


def queue_now(state: bytes, rate_bytes_per_s: int, now_ns: int) -> QueueNow:
    """A port's queues at `now_ns` (CLOCK_MONOTONIC) from its state map value: the
    program drains them only when a packet (or the PFC timer) visits, so what they hold
    now is what they held at `last_ns` less what the port sent since, in the program's
    order: the priority queue first, then the lossless one unless paused, then data
    (ebpf/mrc_switch.bpf.c `drain`)."""
    paused, priority, lossless, data, last_ns = STATE_QUEUES.unpack_from(state)
    elapsed_us = min(max(0, now_ns - last_ns) // 1000, VQ_MAX_IDLE_USEC)
    budget = elapsed_us * rate_bytes_per_s // 1_000_000
    out = []
    for held, drains in ((priority, True), (lossless, not paused), (data, True)):
        take = min(held, budget) if drains else 0
        budget -= take
        out.append(held - take)
    return QueueNow(*out, paused=bool(paused))


def decode_pfc_event(record: bytes) -> tuple[int, int, int]:
    """(kind, ifindex of the port paused or resumed, the port's sequence number of the
    change: the higher of two events of one port is the later change)."""
    return PFC_EVENT.unpack_from(record)


def program_defines() -> dict[str, int]:
    """The facts the C program is compiled with (it has no copy of its own)."""
    defines = {
        "BEHAVIOUR_BEST_EFFORT": protocol.BEHAVIOUR_BEST_EFFORT,
        "BEHAVIOUR_TRIMMABLE": protocol.BEHAVIOUR_TRIMMABLE,
        "BEHAVIOUR_PRIORITY": protocol.BEHAVIOUR_PRIORITY,
        "BEHAVIOUR_LOSSLESS": protocol.BEHAVIOUR_LOSSLESS,
        "ECN_CE": protocol.ECN_CE,
        "VQ_MAX_IDLE_USEC": VQ_MAX_IDLE_USEC,
        "PFC_SLOTS": PFC_SLOTS,
        "PFC_TICK_NS": PFC_TICK_NS,
        "PFC_XOFF": PFC_XOFF,
        "PFC_XON": PFC_XON,
        "MODE_SWITCH": MODE_SWITCH,
        "MODE_FAULTS": MODE_FAULTS,
        "WEYL_STEP": WEYL_STEP,
        "COUNTER_COUNT": len(COUNTERS),
        "ETH_P_WAKE": WAKE_ETHERTYPE,
    }
    defines.update({f"COUNTER_{name.upper()}": index for index, name in enumerate(COUNTERS)})
    return defines


def compile_command(source: Path = SOURCE, output: Path = OBJECT,
                    multiarch: str | None = None) -> list[str]:
    """The clang command that builds the program (Debian's clang; BTF for the spin lock,
    the timer and the map definitions; BPF ISA v3 for its atomic compare-and-swap).
    `multiarch` locates <asm/types.h> (x86_64-linux-gnu...)."""
    multiarch = multiarch or sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    return ["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-mcpu=v3",
            f"-I/usr/include/{multiarch}",
            *(f"-D{name}={value}" for name, value in program_defines().items()),
            "-c", str(source), "-o", str(output)]


@dataclass(frozen=True)
class LosslessGate:
    """The settings of a switch port's lossless leaf (a tbf), open or shut."""

    rate_bytes_per_s: int
    burst_bytes: int
    limit_bytes: int


def lossless_gate(queue_pkts: int, frame_bytes: int, shut: bool) -> LosslessGate:
    """The lossless leaf of a port whose data queue holds `queue_pkts` full frames of
    `frame_bytes`: as deep as `lossless_queue` full frames, open, or shut while the
    port is paused (a tbf drops a frame larger than its bucket, so the shut bucket is
    the largest frame the port carries)."""
    limit = lossless_queue(queue_pkts) * frame_bytes
    if shut:
        return LosslessGate(GATE_SHUT_BYTES_PER_S, protocol.largest_frame_bytes(frame_bytes),
                            limit)
    return LosslessGate(GATE_OPEN_BYTES_PER_S, GATE_OPEN_BURST_BYTES, limit)


def qdisc_commands(intf: str, link: LinkParams, priority_share: float | None = None,
                   trim_size_bytes: int = protocol.TRIMMED_FRAME_BYTES,
                   frame_bytes: int = protocol.DATA_FRAME_BYTES) -> list[str]:
    """The root qdisc of a switch port (tc batch lines, without `tc`): htb at the link
    rate with a priority leaf (1:10, prio 0), a lossless leaf (1:30) and a data leaf
    (1:20, both prio 1); the program picks the leaf through skb->priority. The data leaf
    holds the bytes of `queue_pkts` full frames, as the program's virtual queue counts
    them (a limit in packets dropped small packets the virtual queue had admitted: the
    path check's datagrams, half of them on cluster-c's T0s at 0.44 Mbit/s); the
    priority leaf as many trimmed headers (of
    `trim_size_bytes`) as fit in the same bytes, as on BMv2; the lossless leaf, an open
    tbf that PFC may shut (`lossless_gate`), so many that it never drops (PFC pauses its
    senders first). `priority_share` caps the
    priority leaf's rate (a topology's `trimming.priority_share`). `frame_bytes` is the
    fabric's full DATA frame, the largest a port carries."""
    rate = f"{link.rate_mbit:g}mbit"
    leaf = f"{max(0.008, link.rate_mbit * LEAF_RATE_FRACTION):g}mbit"
    ceil = rate if priority_share is None else f"{link.rate_mbit * priority_share:g}mbit"
    quantum = frame_bytes  # htb's quantum must cover the largest frame
    headers = priority_limit(link.queue_pkts, trim_size_bytes, frame_bytes)
    gate = lossless_gate(link.queue_pkts, frame_bytes, shut=False)
    link_class = tc_class(CLASS_LINK)
    priority, lossless, data = (tc_class(m) for m in (CLASS_PRIORITY, CLASS_LOSSLESS,
                                                      CLASS_DATA))
    # The kernel takes a packet's length for the qdisc before the clsact egress hook
    # runs, so without a size table htb would charge a trimmed header as the whole
    # packet it was cut from, and the real queue would drain far slower than the
    # virtual one. A size table (`stab`, overhead 0) makes the root qdisc measure the
    # packet again as it is enqueued.
    return [
        f"qdisc replace dev {intf} root handle {HTB_HANDLE:x}: "
        f"stab overhead 0 linklayer ethernet htb default {CLASS_DATA:x}",
        f"class replace dev {intf} parent {HTB_HANDLE:x}: classid {link_class} htb "
        f"rate {rate} ceil {rate} quantum {quantum}",
        f"class replace dev {intf} parent {link_class} classid {priority} "
        f"htb rate {leaf} ceil {ceil} prio 0 quantum {quantum}",
        f"class replace dev {intf} parent {link_class} classid {lossless} "
        f"htb rate {leaf} ceil {rate} prio 1 quantum {quantum}",
        f"class replace dev {intf} parent {link_class} classid {data} "
        f"htb rate {leaf} ceil {rate} prio 1 quantum {quantum}",
        f"qdisc replace dev {intf} parent {priority} handle {CLASS_PRIORITY:x}: "
        f"pfifo limit {headers}",
        f"qdisc replace dev {intf} parent {lossless} handle {CLASS_LOSSLESS:x}: "
        f"tbf rate {gate.rate_bytes_per_s * 8}bit burst {gate.burst_bytes} "
        f"limit {gate.limit_bytes}",
        f"qdisc replace dev {intf} parent {data} handle {CLASS_DATA:x}: "
        f"bfifo limit {link.queue_pkts * frame_bytes}",
    ]

