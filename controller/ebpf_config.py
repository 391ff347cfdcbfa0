"""What the kernel data plane's eBPF switch program is given, per port: pure, no I/O.

The program (`ebpf/mrc_switch.bpf.c`, docs/ebpf-switch.md) runs on the tc clsact egress
hook of a switch port. This module owns everything it is told:

- the compiler command, with the protocol facts it needs as `-D` definitions taken from
  `hosts/protocol.py`, so the C source repeats none of them;
- each port's configuration, from the same per-port values the P4 `port_config` table
  gets (`controller/tables.py`: host-facing, ECN and trim thresholds) plus the link's
  rate and queue limit, encoded as the program's `struct port_config`;
- the encoding of fault settings (random loss per port, gray loss per destination
  prefix), of the virtual queue reset, and the decoding of the counters;
- the htb set-up whose priority class serves control packets and trimmed headers first.

Map writes are `MapWrite` values; `topologies/ebpf_port.py` applies them to one loaded
port. Thresholds given in packets become bytes of full DATA frames, the unit of the
program's virtual queue.
"""

from __future__ import annotations

import math
import struct
import sysconfig
from dataclasses import dataclass
from ipaddress import IPv6Address
from pathlib import Path

from controller.tables import PortRole, SwitchTables
from hosts import protocol
from topologies.model import Fabric, LinkParams

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "ebpf" / "mrc_switch.bpf.c"
OBJECT = ROOT / "build" / "ebpf" / "mrc_switch.bpf.o"
SECTION = "tc"
# What the object is built from: it is stale when any of these is newer.
BUILD_INPUTS = (SOURCE, Path(__file__), Path(protocol.__file__))

# Map names, as declared in the C program.
CONFIG_MAP = "config"
VQUEUE_MAP = "vqueue"
COUNTERS_MAP = "counters"
LOSS_MAP = "port_loss"
GRAY_MAP = "gray_loss"

# Per-port counters, in the order of their index in the counters map.
COUNTERS = ("forwarded", "trimmed", "ecn_marked", "dropped", "fault_dropped")

# struct port_config and its field names, in order. Maps hold host byte order.
PORT_CONFIG = struct.Struct("=QIIIIIBBxx")
PORT_CONFIG_FIELDS = ("rate_bytes_per_s", "ecn_threshold_bytes", "trim_threshold_bytes",
                      "drop_threshold_bytes", "classid_control", "classid_data",
                      "host_facing", "enabled")
# struct vq_state: spin lock, padding, backlog bytes, time of the last packet.
VQUEUE_STATE = struct.Struct("=IIQQ")
# struct gray_key: prefix length (host order) and IPv6 address (network order).
GRAY_KEY = struct.Struct("=I16s")
U32 = struct.Struct("=I")
U64 = struct.Struct("=Q")
KEY_ZERO = U32.pack(0)
# A threshold the 32-bit virtual backlog compares against and never reaches.
NEVER = 0xFFFFFFFF
# The virtual queue drains by (microseconds since the last packet, at most this) x rate:
# the cap keeps the product inside 64 bits and bounds the rate a port accepts.
VQ_MAX_IDLE_USEC = 1_000_000_000
MAX_RATE_BYTES_PER_S = ((1 << 64) - 1) // VQ_MAX_IDLE_USEC
# A loss threshold of 2^32 is above every 32-bit random number: every packet is lost.
LOSS_SCALE = 1 << 32

# The htb set-up of a port: one class at the link rate with two leaves that borrow all
# of it. Both leaves are guaranteed only a sliver of the rate, so nearly all traffic is
# borrowed, and htb lends to the lower `prio` first: control packets and trimmed
# headers leave before any queued data, and together they never exceed the link rate.
# tc reads class ids in hex: 1:10 is minor 0x10.
HTB_HANDLE = 0x1
CLASS_LINK = 0x1
CLASS_CONTROL = 0x10
CLASS_DATA = 0x20
LEAF_RATE_FRACTION = 0.01


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
    """One update of a map of the program on a port; value None deletes the key."""

    map_name: str
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class PortConfig:
    """The program's settings of one port (struct port_config)."""

    rate_bytes_per_s: int
    ecn_threshold_bytes: int
    trim_threshold_bytes: int
    drop_threshold_bytes: int
    host_facing: bool
    classid_control: int = classid(CLASS_CONTROL)
    classid_data: int = classid(CLASS_DATA)

    def encode(self) -> bytes:
        for name in ("ecn_threshold_bytes", "trim_threshold_bytes", "drop_threshold_bytes"):
            if not 0 <= getattr(self, name) <= NEVER:
                raise EbpfConfigError(f"{name}: must fit 32 bits (got {getattr(self, name)})")
        if not 1 <= self.rate_bytes_per_s <= MAX_RATE_BYTES_PER_S:
            raise EbpfConfigError(f"rate_bytes_per_s: must be 1..{MAX_RATE_BYTES_PER_S} "
                                  f"(got {self.rate_bytes_per_s})")
        return PORT_CONFIG.pack(self.rate_bytes_per_s, self.ecn_threshold_bytes,
                                self.trim_threshold_bytes, self.drop_threshold_bytes,
                                self.classid_control, self.classid_data,
                                int(self.host_facing), 1)

    def write(self) -> MapWrite:
        return MapWrite(CONFIG_MAP, KEY_ZERO, self.encode())


def rate_bytes_per_s(link: LinkParams) -> int:
    return max(1, round(link.rate_mbit * 1e6 / 8))


def port_config(tables: SwitchTables, role: PortRole, link: LinkParams,
                frame_bytes: int = protocol.DATA_FRAME_BYTES) -> PortConfig:
    """A switch port's settings: the thresholds the P4 `port_config` table gets, in bytes
    of `frame_bytes` frames, the link rate, and the queue limit as the drop threshold."""
    return PortConfig(
        rate_bytes_per_s=rate_bytes_per_s(link),
        ecn_threshold_bytes=tables.ecn_threshold_pkts * frame_bytes,
        trim_threshold_bytes=tables.trim_threshold_pkts * frame_bytes,
        drop_threshold_bytes=link.queue_pkts * frame_bytes,
        host_facing=role.host_facing,
    )


def switch_port_configs(fabric: Fabric, tables: SwitchTables) -> dict[str, PortConfig]:
    """Every port of one switch: interface name -> its settings."""
    roles = {role.port: role for role in tables.ports}
    return {port.intf: port_config(tables, roles[port.number], fabric.link_params(port.tier))
            for port in fabric.ports(tables.switch)}


def faults_only_config(link: LinkParams) -> PortConfig:
    """A port (a host's, say) that only injects faults: it never marks, trims or drops."""
    return PortConfig(rate_bytes_per_s(link), NEVER, NEVER, NEVER, host_facing=False)


def loss_threshold(probability: float) -> int:
    """The program's encoding of a loss probability: lost when prandom_u32 < threshold."""
    if not 0.0 <= probability <= 1.0 or math.isnan(probability):
        raise EbpfConfigError(f"loss probability: must be between 0 and 1 (got {probability})")
    return round(probability * LOSS_SCALE)


def loss_write(probability: float) -> MapWrite:
    """Random loss of every packet the port sends (0 clears it)."""
    return MapWrite(LOSS_MAP, KEY_ZERO, U64.pack(loss_threshold(probability)))


def gray_key(address: str, prefix_len: int = 128) -> bytes:
    """The key of a destination prefix: the IPv6 destination as it leaves the port (the
    uSID list after this switch's shift), or its first `prefix_len` bits."""
    try:
        packed = IPv6Address(address).packed
    except ValueError as err:
        raise EbpfConfigError(f"gray loss address: {err}") from None
    if not 0 <= prefix_len <= 128:
        raise EbpfConfigError(f"gray loss prefix length: must be 0..128 (got {prefix_len})")
    return GRAY_KEY.pack(prefix_len, packed)


def gray_loss_write(address: str, probability: float, prefix_len: int = 128) -> MapWrite:
    """Lose `probability` of the packets to a destination prefix (one path, gray)."""
    return MapWrite(GRAY_MAP, gray_key(address, prefix_len),
                    U64.pack(loss_threshold(probability)))


def gray_loss_clear(address: str, prefix_len: int = 128) -> MapWrite:
    return MapWrite(GRAY_MAP, gray_key(address, prefix_len), None)


def vqueue_reset() -> MapWrite:
    """Empty the virtual queue (tests; a port's queue starts empty anyway)."""
    return MapWrite(VQUEUE_MAP, KEY_ZERO, VQUEUE_STATE.pack(0, 0, 0, 0))


def decode_counters(values: list[int]) -> dict[str, int]:
    """Counter values in map order (summed over CPUs) -> {name: packets}."""
    if len(values) != len(COUNTERS):
        raise EbpfConfigError(f"counters: expected {len(COUNTERS)} values, got {len(values)}")
    return dict(zip(COUNTERS, values))


def program_defines() -> dict[str, int]:
    """The protocol facts the C program is compiled with (it has no copy of its own)."""
    defines = {
        "MRC_UDP_PORT": protocol.MRC_UDP_PORT,
        "MRC_TYPE_DATA": protocol.DATA,
        "MRC_FLAG_TRIMMED": protocol.F_TRIMMED,
        "MRC_FLAG_TRIMMED_LASTHOP": protocol.F_TRIMMED_LASTHOP,
        "MRC_HEADER_LEN": protocol.MRC_HEADER_BYTES,
        "MRC_TRIMMED_FRAME_BYTES": protocol.TRIMMED_FRAME_BYTES,
        "MRC_TRIMMED_L4_BYTES": protocol.TRIMMED_L4_BYTES,
        "MRC_DSCP_TRIMMABLE": protocol.DSCP_TRIMMABLE,
        "MRC_DSCP_ROCE": protocol.DSCP_ROCE,
        "MRC_ECN_CE": protocol.ECN_CE,
        "VQ_MAX_IDLE_USEC": VQ_MAX_IDLE_USEC,
        "COUNTER_COUNT": len(COUNTERS),
    }
    defines.update({f"COUNTER_{name.upper()}": index for index, name in enumerate(COUNTERS)})
    return defines


def compile_command(source: Path = SOURCE, output: Path = OBJECT,
                    multiarch: str | None = None) -> list[str]:
    """The clang command that builds the program (Debian's clang; BTF for the spin lock
    and the map definitions). `multiarch` locates <asm/types.h> (x86_64-linux-gnu...)."""
    multiarch = multiarch or sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    return ["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf",
            f"-I/usr/include/{multiarch}",
            *(f"-D{name}={value}" for name, value in program_defines().items()),
            "-c", str(source), "-o", str(output)]


def qdisc_commands(intf: str, link: LinkParams) -> list[str]:
    """The root qdisc of a port running the program: htb at the link rate with a
    priority leaf (1:10, prio 0) for control packets and trimmed headers and a data leaf
    (1:20, prio 1); the program picks the leaf through skb->priority. The data leaf
    holds `queue_pkts` packets; the priority leaf as many trimmed headers as fit in the
    same bytes, as on BMv2."""
    rate = f"{link.rate_mbit:g}mbit"
    leaf = f"{max(0.008, link.rate_mbit * LEAF_RATE_FRACTION):g}mbit"
    quantum = protocol.DATA_FRAME_BYTES
    headers = link.queue_pkts * protocol.DATA_FRAME_BYTES // protocol.TRIMMED_FRAME_BYTES
    link_class, control, data = (tc_class(m) for m in (CLASS_LINK, CLASS_CONTROL, CLASS_DATA))
    # The kernel takes a packet's length for the qdisc before the clsact egress hook
    # runs, so without a size table htb would charge a trimmed header as the whole
    # packet it was cut from, and the real queue would drain far slower than the
    # virtual one. A size table (`stab`, overhead 0) makes the root qdisc measure the
    # packet again as it is enqueued.
    return [
        f"tc qdisc replace dev {intf} root handle {HTB_HANDLE:x}: "
        f"stab overhead 0 linklayer ethernet htb default {CLASS_DATA:x}",
        f"tc class replace dev {intf} parent {HTB_HANDLE:x}: classid {link_class} htb "
        f"rate {rate} ceil {rate} quantum {quantum}",
        f"tc class replace dev {intf} parent {link_class} classid {control} "
        f"htb rate {leaf} ceil {rate} prio 0 quantum {quantum}",
        f"tc class replace dev {intf} parent {link_class} classid {data} "
        f"htb rate {leaf} ceil {rate} prio 1 quantum {quantum}",
        f"tc qdisc replace dev {intf} parent {control} handle {CLASS_CONTROL:x}: "
        f"pfifo limit {headers}",
        f"tc qdisc replace dev {intf} parent {data} handle {CLASS_DATA:x}: "
        f"pfifo limit {link.queue_pkts}",
    ]
