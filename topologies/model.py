"""The topology model: load a topology YAML file, validate it, and build the fabric graph.

A topology file describes a two-tier multi-plane Clos network by a handful of numbers
(planes, racks, hosts per rack, T1 switches per plane) plus link parameters per tier.
`load_topology()` turns it into a `Fabric`: an immutable graph of hosts, switches and
links with their ports, uSIDs and MACs. Nothing starts when a Fabric is built; the
Mininet builder (`topologies.network`) and the controller read it.

User mistakes raise `TopologyError`, whose text is one line naming the file, the field,
what is wrong and how to fix it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hosts import protocol
from topologies import addressing, scale
from topologies.errors import UserError, shown

TOPOLOGY_DIR = Path(__file__).resolve().parent

# Limits come from the addressing rule (see topologies/addressing.py) and, for the
# link parameters, from what tc and BMv2 can emulate sensibly.
MAX_PLANES = addressing.MAX_PLANES
MAX_RACKS = addressing.MAX_RACKS
MAX_T1_PER_PLANE = addressing.MAX_T1_PER_PLANE
MAX_HOSTS = addressing.MAX_HOSTS
MAX_RATE_MBIT = 10_000
MAX_DELAY_MS = 1_000
MAX_QUEUE_PKTS = 100_000

TIERS = ("host_t0", "t0_t1")
MAX_FILE_BYTES = 1 << 20  # topology and scenario files are a few lines


class TopologyError(UserError):
    """A topology file is missing, unreadable or invalid. The message is one line."""


@dataclass(frozen=True)
class LinkParams:
    """Emulated properties of every link of one tier (both directions)."""

    rate_mbit: float
    delay_ms: float
    queue_pkts: int


@dataclass(frozen=True)
class TopologySpec:
    """The validated numbers of a topology file."""

    name: str
    planes: int
    racks: int
    hosts_per_rack: int
    t1_per_plane: int
    host_t0: LinkParams
    t0_t1: LinkParams
    ecn_threshold_pkts: int  # RED's Kmin: no mark below
    trim_threshold_pkts: int  # trimming starts here on a port between switches
    source: str = "<memory>"
    # The DSCP of each traffic class, by class id (hosts/protocol.py CLASS_NAMES).
    traffic_classes: tuple[int, ...] = protocol.DEFAULT_DSCP
    # Trimming as SONiC configures it: the frame bytes a trimmed packet keeps, and
    # whether a port facing a host writes TRIMMED_LASTHOP (asymmetric) or TRIMMED too.
    trim_size_bytes: int = protocol.TRIMMED_FRAME_BYTES
    trim_asymmetric: bool = True
    # The most of a port's rate its priority class (control, trimmed, CNPs) may take;
    # None: strict priority without a cap.
    priority_share: float | None = None
    # RED's Kmax (every ECT packet marked at or above; = Kmin: a step), and where a port
    # facing a host starts trimming. None: as ecn_threshold_pkts / trim_threshold_pkts.
    ecn_kmax_pkts: int | None = None
    trim_lasthop_pkts: int | None = None
    # The threshold fields the topology file set; the others follow the fabric's BDP
    # (topologies/scale.py).
    explicit: frozenset = field(default=frozenset(), compare=False)
    # Payload bytes of a full DATA packet: the fabric's MTU (its ports' MTU follows,
    # protocol.interface_mtu). Queues and thresholds count frames of this size.
    mtu_payload: int = protocol.DEFAULT_MTU_PAYLOAD

    @property
    def data_frame_bytes(self) -> int:
        """A full DATA frame of this fabric: the unit of its queues and thresholds."""
        return protocol.data_frame_bytes(self.mtu_payload)

    @property
    def interface_mtu(self) -> int:
        """The MTU of every port of the fabric (hosts' and switches')."""
        return protocol.interface_mtu(self.mtu_payload)

    @property
    def ecn_kmax(self) -> int:
        return self.ecn_threshold_pkts if self.ecn_kmax_pkts is None else self.ecn_kmax_pkts

    @property
    def trim_lasthop(self) -> int:
        return (self.trim_threshold_pkts if self.trim_lasthop_pkts is None
                else self.trim_lasthop_pkts)

    @property
    def base_rtt_s(self) -> float:
        """The longest path's round trip with empty queues (topologies/scale.py)."""
        return scale.base_rtt_s(self.host_t0.rate_mbit, self.t0_t1.rate_mbit,
                                self.host_t0.delay_ms, self.t0_t1.delay_ms,
                                self.data_frame_bytes)

    @property
    def bdp_frames(self) -> float:
        """One NIC port's bandwidth-delay product, in full DATA frames."""
        return scale.bdp_frames(self.host_t0.rate_mbit, self.base_rtt_s,
                                self.data_frame_bytes)

    @property
    def hosts(self) -> int:
        return self.racks * self.hosts_per_rack

    @property
    def host_line_rate_mbit(self) -> float:
        """A host's capacity: one port per plane at the host link's rate."""
        return self.planes * self.host_t0.rate_mbit

    def host_bytes_in(self, seconds: float) -> int:
        """Bytes a host sends in `seconds` at its line rate."""
        return int(seconds * self.host_line_rate_mbit * 1e6 / 8)


@dataclass(frozen=True)
class Host:
    name: str
    index: int
    rack: int
    usid: int

    role = "host"


@dataclass(frozen=True)
class Switch:
    """A T0 (leaf, one per rack and plane) or T1 (spine, `t1_per_plane` per plane)."""

    name: str
    role: str  # "t0" or "t1"
    plane: int
    index: int  # the rack for a T0, the spine number for a T1
    usid: int


@dataclass(frozen=True)
class Link:
    """One point-to-point link; `a` is the lower tier (host or T0)."""

    a: str
    a_port: int
    b: str
    b_port: int
    tier: str  # "host_t0" or "t0_t1"
    plane: int


@dataclass(frozen=True)
class Port:
    """One end of a link as seen from its node."""

    node: str
    number: int
    peer: str
    peer_port: int
    tier: str

    @property
    def intf(self) -> str:
        return addressing.intf_name(self.node, self.number)

    @property
    def mac(self) -> str:
        return addressing.mac_address(self.node, self.number)

    @property
    def peer_mac(self) -> str:
        return addressing.mac_address(self.peer, self.peer_port)


@dataclass(frozen=True)
class Fabric:
    """The whole network graph, derived from a TopologySpec by rule."""

    spec: TopologySpec
    hosts: tuple[Host, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    _ports: dict[str, tuple[Port, ...]] = field(repr=False, compare=False)
    _nodes: dict[str, Host | Switch] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def node(self, name: str) -> Host | Switch:
        return self._nodes[name]

    def find(self, name: str) -> Host | Switch | None:
        """The node called `name`, or None if the fabric has none."""
        return self._nodes.get(name)

    def host(self, index: int) -> Host:
        return self.hosts[index]

    def t0(self, plane: int, rack: int) -> Switch:
        return self.switches[plane * self._per_plane + rack]

    def t1(self, plane: int, spine: int) -> Switch:
        return self.switches[plane * self._per_plane + self.spec.racks + spine]

    @property
    def _per_plane(self) -> int:
        return self.spec.racks + self.spec.t1_per_plane

    def ports(self, node: str) -> tuple[Port, ...]:
        """The ports of a node, ordered by port number."""
        return self._ports[node]

    def link_params(self, tier: str) -> LinkParams:
        return self.spec.host_t0 if tier == "host_t0" else self.spec.t0_t1


def build_fabric(spec: TopologySpec) -> Fabric:
    """Build the graph. Port numbering (documented in docs/addressing.md):

    - host port p faces plane p (interface `<host>-eth<p>`);
    - T0 ports 0..hosts_per_rack-1 face the rack's hosts, then one uplink per T1;
    - T1 port r faces the T0 of rack r.
    """
    hosts = tuple(
        Host(addressing.host_name(i), i, i // spec.hosts_per_rack, addressing.host_usid(i))
        for i in range(spec.hosts)
    )
    switches: list[Switch] = []
    for p in range(spec.planes):
        for r in range(spec.racks):
            switches.append(Switch(addressing.t0_name(p, r), "t0", p, r, addressing.t0_usid(p, r)))
        for s in range(spec.t1_per_plane):
            switches.append(Switch(addressing.t1_name(p, s), "t1", p, s, addressing.t1_usid(p, s)))
    links: list[Link] = []
    for p in range(spec.planes):
        for h in hosts:
            t0 = addressing.t0_name(p, h.rack)
            links.append(Link(h.name, p, t0, h.index % spec.hosts_per_rack, "host_t0", p))
        for r in range(spec.racks):
            for s in range(spec.t1_per_plane):
                links.append(
                    Link(addressing.t0_name(p, r), spec.hosts_per_rack + s,
                         addressing.t1_name(p, s), r, "t0_t1", p)
                )
    ports: dict[str, list[Port]] = {n.name: [] for n in (*hosts, *switches)}
    for link in links:
        ports[link.a].append(Port(link.a, link.a_port, link.b, link.b_port, link.tier))
        ports[link.b].append(Port(link.b, link.b_port, link.a, link.a_port, link.tier))
    frozen = {n: tuple(sorted(ps, key=lambda port: port.number)) for n, ps in ports.items()}
    nodes = {n.name: n for n in (*hosts, *switches)}
    return Fabric(spec, hosts, tuple(switches), tuple(links), frozen, nodes)


def with_rate_cap(fabric: Fabric, rate_mbit: float) -> Fabric:
    """`fabric` with no link faster than `rate_mbit`, in the same proportions: for runs
    whose machine cannot drive the topology's rates (BMv2's CPU, or many Python agents
    on few cores), so that the network, not the CPU, is the bottleneck."""
    spec = fabric.spec
    if max(spec.host_t0.rate_mbit, spec.t0_t1.rate_mbit) <= rate_mbit:
        return fabric
    return rescaled(fabric,
                    dataclasses.replace(spec.host_t0,
                                        rate_mbit=min(rate_mbit, spec.host_t0.rate_mbit)),
                    dataclasses.replace(spec.t0_t1,
                                        rate_mbit=min(rate_mbit, spec.t0_t1.rate_mbit)))


def without_delay(fabric: Fabric) -> Fabric:
    """`fabric` as a kernel without netem emulates it: links without delay, in the same
    proportions."""
    spec = fabric.spec
    if spec.host_t0.delay_ms == spec.t0_t1.delay_ms == 0:
        return fabric
    return rescaled(fabric, dataclasses.replace(spec.host_t0, delay_ms=0.0),
                    dataclasses.replace(spec.t0_t1, delay_ms=0.0))


def with_mtu(fabric: Fabric, mtu_payload: int) -> Fabric:
    """`fabric` carrying DATA packets of `mtu_payload` payload bytes, in the same
    proportions: its queues and thresholds, counted in frames of the new size, the same
    number of BDPs (about the same bytes of buffer)."""
    low, high = protocol.MTU_PAYLOAD_RANGE
    if not low <= mtu_payload <= high:
        raise TopologyError(fabric.spec.source, "mtu_payload (MTU=)", f"{mtu_payload} is "
                            "out of range", f"use a payload size from {low} to {high} bytes")
    if mtu_payload == fabric.spec.mtu_payload:
        return fabric
    return _rescaled(fabric, dataclasses.replace(fabric.spec, mtu_payload=mtu_payload))


def rescaled(fabric: Fabric, host_t0: LinkParams, t0_t1: LinkParams) -> Fabric:
    """`fabric` with new link rates or delays and every queue and threshold scaled by
    the change of its BDP (topologies/scale.py), so that each stays the same number of
    BDPs (docs/similarity.md). The links' queues are taken from `fabric`, not from
    `host_t0` and `t0_t1`."""
    return _rescaled(fabric, dataclasses.replace(fabric.spec, host_t0=host_t0, t0_t1=t0_t1))


def _rescaled(fabric: Fabric, changed: TopologySpec) -> Fabric:
    """`changed` (the spec of `fabric` with new links or a new MTU) with every queue
    and threshold of `fabric` scaled by the change of its BDP in frames."""
    spec = fabric.spec
    ratio = changed.bdp_frames / spec.bdp_frames
    # Each threshold keeps its order against the one before (as a topology file must):
    # rounded up on its own, a shrinking Kmax could reach trimming's start.
    kmin = scale.scaled(spec.ecn_threshold_pkts, ratio)
    kmax = max(kmin, scale.scaled(spec.ecn_kmax, ratio))
    trim = max(kmax + 1, scale.scaled(spec.trim_threshold_pkts, ratio))
    lasthop = max(trim, scale.scaled(spec.trim_lasthop, ratio))
    least = lasthop + 1  # a queue still holds its thresholds
    return build_fabric(dataclasses.replace(
        changed, ecn_threshold_pkts=kmin, ecn_kmax_pkts=kmax, trim_threshold_pkts=trim,
        trim_lasthop_pkts=lasthop,
        host_t0=dataclasses.replace(
            changed.host_t0,
            queue_pkts=scale.scaled_queue(spec.host_t0.queue_pkts, ratio, least)),
        t0_t1=dataclasses.replace(
            changed.t0_t1, queue_pkts=scale.scaled_queue(spec.t0_t1.queue_pkts, ratio, least))))


# --------------------------------------------------------------------------- loading

_TOP_FIELDS = {
    "name", "description", "planes", "racks", "hosts_per_rack", "t1_per_plane", "links",
    "ecn_threshold_pkts", "ecn_kmax_pkts", "trim_threshold_pkts", "trim_lasthop_pkts",
    "traffic_classes", "trimming", "mtu_payload",
}
# The threshold fields, in the order they must grow (each at least the one before).
_THRESHOLDS = ("ecn_threshold_pkts", "ecn_kmax_pkts", "trim_threshold_pkts",
               "trim_lasthop_pkts")
_TRIMMING_FIELDS = {"size_bytes", "dscp", "priority_share"}
_LINK_FIELDS = {"rate_mbit", "delay_ms", "queue_pkts"}


def resolve_topology_path(name_or_path: str) -> Path:
    """`TOPO=` takes a name from topologies/ (with or without .yaml) or a path to a file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return candidate
    return TOPOLOGY_DIR / f"{name_or_path}.yaml"


def available_topologies() -> list[str]:
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yaml"))


def read_yaml(path: Path, error: type[UserError]) -> object:
    """The YAML document in a user's file; any reason it cannot be read is `error`.

    Shared by topology and scenario files. A file is read whole, so its size is capped;
    it must be UTF-8 text; nesting deep enough to exhaust Python's stack is refused too.
    """
    source = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise error(source, "file", f"larger than {MAX_FILE_BYTES // 1024} KiB",
                        "give the path of a topology or scenario YAML file")
        text = path.read_bytes().decode("utf-8")
    except OSError as err:
        raise error(source, "file", f"cannot be read ({err.strerror or err})",
                    "check the path and its permissions") from None
    except UnicodeDecodeError:
        raise error(source, "file", "is not UTF-8 text",
                    "give the path of a topology or scenario YAML file") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        raise error(source, where, "not valid YAML",
                    "check the indentation and the 'key: value' syntax there") from None
    except RecursionError:
        raise error(source, "file", "nested too deeply",
                    "write flat mappings and lists as in the shipped files") from None


def load_topology(name_or_path: str, mtu_payload: int | None = None) -> Fabric:
    """Read, validate and build a topology; with `mtu_payload` (an entry point's MTU=),
    at that MTU instead of the file's (`with_mtu`). Raises TopologyError on any user
    mistake."""
    path = resolve_topology_path(name_or_path)
    source = str(path)
    if not path.is_file():
        names = ", ".join(available_topologies())
        raise TopologyError(source, "TOPO", "no such topology file",
                            f"use one of: {names}, or a path to a YAML file")
    data = read_yaml(path, TopologyError)
    fabric = build_fabric(parse_spec(data, source, default_name=path.stem))
    return fabric if mtu_payload is None else with_mtu(fabric, mtu_payload)


def parse_spec(data: object, source: str, default_name: str = "topology") -> TopologySpec:
    """Validate the parsed YAML document and return its TopologySpec."""
    if not isinstance(data, dict):
        raise TopologyError(source, "document", "must be a mapping of fields",
                            "start from topologies/2tier-2plane.yaml")
    unknown = sorted(set(map(str, data)) - _TOP_FIELDS)
    if unknown:
        raise TopologyError(source, unknown[0], "unknown field",
                            f"remove it; known fields are {', '.join(sorted(_TOP_FIELDS))}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise TopologyError(source, "name",
                            f"must be letters, digits, '-' or '_' (got {shown(name)})",
                            "use a name like 2tier-8plane")
    planes = _int(data, "planes", source, 1, MAX_PLANES)
    racks = _int(data, "racks", source, 1, MAX_RACKS)
    hosts_per_rack = _int(data, "hosts_per_rack", source, 1, MAX_HOSTS)
    t1_per_plane = _int(data, "t1_per_plane", source, 1, MAX_T1_PER_PLANE)
    if racks * hosts_per_rack < 2:
        raise TopologyError(source, "hosts_per_rack", "the network needs at least 2 hosts",
                            "raise racks or hosts_per_rack")
    if racks * hosts_per_rack > MAX_HOSTS:
        raise TopologyError(source, "hosts_per_rack",
                            f"racks x hosts_per_rack exceeds {MAX_HOSTS} hosts",
                            "use fewer racks or hosts per rack")
    _check_emulable(source, planes, racks, hosts_per_rack, t1_per_plane)
    links = data.get("links")
    if not isinstance(links, dict):
        raise TopologyError(source, "links", "missing or not a mapping",
                            "add links: {host_t0: {...}, t0_t1: {...}} as in 2tier-2plane.yaml")
    unknown = sorted(set(map(str, links)) - set(TIERS))
    if unknown:
        raise TopologyError(source, f"links.{unknown[0]}", "unknown tier",
                            f"use only {' and '.join(TIERS)}")
    params = {tier: _link(links.get(tier), f"links.{tier}", source) for tier in TIERS}
    mtu_payload = _int(data, "mtu_payload", source, *protocol.MTU_PAYLOAD_RANGE,
                       default=protocol.DEFAULT_MTU_PAYLOAD)
    frame = protocol.data_frame_bytes(mtu_payload)
    limits = _thresholds(data, params, source, frame)
    return TopologySpec(name, planes, racks, hosts_per_rack, t1_per_plane,
                        params["host_t0"], params["t0_t1"], limits["ecn_threshold_pkts"],
                        limits["trim_threshold_pkts"], source,
                        _traffic_classes(data.get("traffic_classes"), source),
                        **_trimming(data.get("trimming"), source, frame),
                        ecn_kmax_pkts=limits["ecn_kmax_pkts"],
                        trim_lasthop_pkts=limits["trim_lasthop_pkts"],
                        explicit=frozenset(f for f in _THRESHOLDS if f in data),
                        mtu_payload=mtu_payload)


def _thresholds(data: dict, params: dict, source: str, frame: int) -> dict[str, int]:
    """The four thresholds (packets): each as the file sets it, or by the fabric's BDP
    (topologies/scale.py), raised where needed so that each is at least the one before
    (a Kmax the file leaves out never falls below the Kmin it sets); all below the
    smallest queue."""
    host, uplink = params["host_t0"], params["t0_t1"]
    rtt = scale.base_rtt_s(host.rate_mbit, uplink.rate_mbit, host.delay_ms, uplink.delay_ms,
                           frame)
    rule = scale.thresholds(scale.bdp_frames(host.rate_mbit, rtt, frame))
    derived = dict(zip(_THRESHOLDS, (rule.ecn_kmin, rule.ecn_kmax, rule.trim,
                                     rule.trim_lasthop)))
    queue = min(p.queue_pkts for p in params.values())
    out: dict[str, int] = {}
    least, previous = 1, None
    for name in _THRESHOLDS:
        strict = name == "trim_threshold_pkts"  # trimming starts above the marks
        low = least + 1 if strict and previous else least
        if name in data:
            value = _int(data, name, source, low, queue - 1 if name == _THRESHOLDS[0] else queue)
        else:
            value = max(low, derived[name])
            if value > queue:
                raise TopologyError(source, name, f"the fabric's BDP asks for {value} "
                                    f"packets, more than the smallest queue ({queue})",
                                    f"set {name} (at most {queue}) or deepen the queues")
        out[name] = value
        least, previous = value, name
    return out


def _traffic_classes(data: object, source: str) -> tuple[int, ...]:
    """`traffic_classes: {control: 46, ...}`: the DSCP of any class, the rest default."""
    if data is None:
        return protocol.DEFAULT_DSCP
    if not isinstance(data, dict):
        raise TopologyError(source, "traffic_classes", "must be a mapping of class to DSCP",
                            f"e.g. traffic_classes: {{control: 46}}; classes: "
                            f"{', '.join(protocol.CLASS_NAMES)}")
    unknown = sorted(set(map(str, data)) - set(protocol.CLASS_NAMES))
    if unknown:
        raise TopologyError(source, f"traffic_classes.{unknown[0]}", "unknown traffic class",
                            f"use {', '.join(protocol.CLASS_NAMES)}")
    dscp = list(protocol.DEFAULT_DSCP)
    for index, name in enumerate(protocol.CLASS_NAMES):
        if name in data:
            dscp[index] = _int(data, name, source, 0, 63, prefix="traffic_classes.")
    shared = next((i for i, code in enumerate(dscp) if dscp.count(code) > 1), None)
    if shared is not None:
        raise TopologyError(source, f"traffic_classes.{protocol.CLASS_NAMES[shared]}",
                            f"DSCP {dscp[shared]} names two classes",
                            "give every class a DSCP of its own")
    return tuple(dscp)


def _trimming(data: object, source: str, frame: int) -> dict:
    """`trimming: {size_bytes: 128, dscp: asymmetric, priority_share: 0.5}`."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TopologyError(source, "trimming", "must be a mapping",
                            "e.g. trimming: {size_bytes: 128, dscp: asymmetric}")
    unknown = sorted(set(map(str, data)) - _TRIMMING_FIELDS)
    if unknown:
        raise TopologyError(source, f"trimming.{unknown[0]}", "unknown field",
                            f"use only {', '.join(sorted(_TRIMMING_FIELDS))}")
    out: dict = {}
    if "size_bytes" in data:
        out["trim_size_bytes"] = _int(data, "size_bytes", source, protocol.TRIMMED_FRAME_BYTES,
                                      frame, prefix="trimming.")
    if "dscp" in data:
        if data["dscp"] not in ("asymmetric", "symmetric"):
            raise TopologyError(source, "trimming.dscp", f"must be asymmetric or symmetric "
                                f"(got {shown(data['dscp'])})",
                                "asymmetric: TRIMMED_LASTHOP on ports facing a host")
        out["trim_asymmetric"] = data["dscp"] == "asymmetric"
    if "priority_share" in data:
        out["priority_share"] = _number(data, "priority_share", source, 0, 1, "trimming.",
                                        low_inclusive=False)
    return out


def _check_emulable(source: str, planes: int, racks: int, hosts_per_rack: int,
                    t1_per_plane: int) -> None:
    """Port numbers must fit the MAC rule and interface names Linux's 15 characters."""
    if hosts_per_rack + t1_per_plane > addressing.MAX_PORTS:
        raise TopologyError(source, "hosts_per_rack",
                            f"a T0 would need {hosts_per_rack + t1_per_plane} ports "
                            f"(hosts_per_rack + t1_per_plane), more than {addressing.MAX_PORTS}",
                            "use fewer hosts per rack or T1 switches per plane")
    longest = max(
        addressing.intf_name(addressing.t0_name(planes - 1, racks - 1),
                             hosts_per_rack + t1_per_plane - 1),
        addressing.intf_name(addressing.t1_name(planes - 1, t1_per_plane - 1), racks - 1),
        key=len,
    )
    if len(longest) > addressing.MAX_INTF_NAME:
        raise TopologyError(source, "racks",
                            f"too large to emulate: interface name {longest} is longer than "
                            f"{addressing.MAX_INTF_NAME} characters",
                            "use fewer racks, hosts or T1 switches (size full-scale networks "
                            "with python3 -m topologies.size)")


def _int(data: dict, key: str, source: str, low: int, high: int, default: int | None = None,
         prefix: str = "") -> int:
    value = data.get(key, default)
    where = f"{prefix}{key}"
    if value is None:
        raise TopologyError(source, where, "missing", f"add '{key}: <integer {low}..{high}>'")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(source, where, f"must be an integer (got {shown(value)})",
                            f"write a whole number from {low} to {high}")
    if not low <= value <= high:
        raise TopologyError(source, where, f"{value} is out of range",
                            f"use a value from {low} to {high}")
    return value


def _number(data: dict, key: str, source: str, low: float, high: float, prefix: str,
            low_inclusive: bool) -> float:
    value = data.get(key)
    where = f"{prefix}{key}"
    if value is None:
        raise TopologyError(source, where, "missing", f"add '{key}: <number>'")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TopologyError(source, where, f"must be a number (got {shown(value)})",
                            f"write a number from {low} to {high}")
    if not math.isfinite(value):  # YAML's .nan and .inf pass every comparison below
        raise TopologyError(source, where, f"must be a finite number (got {value})",
                            f"write a number from {low} to {high}")
    too_low = value < low if low_inclusive else value <= low
    if too_low or value > high:
        bound = "from" if low_inclusive else "above"
        raise TopologyError(source, where, f"{value} is out of range",
                            f"use a value {bound} {low} up to {high}")
    return float(value)


def _link(data: object, where: str, source: str) -> LinkParams:
    if not isinstance(data, dict):
        raise TopologyError(source, where, "missing or not a mapping",
                            "give rate_mbit, delay_ms and queue_pkts for this tier")
    unknown = sorted(set(map(str, data)) - _LINK_FIELDS)
    if unknown:
        raise TopologyError(source, f"{where}.{unknown[0]}", "unknown field",
                            f"use only {', '.join(sorted(_LINK_FIELDS))}")
    prefix = f"{where}."
    return LinkParams(
        rate_mbit=_number(data, "rate_mbit", source, 0, MAX_RATE_MBIT, prefix, False),
        delay_ms=_number(data, "delay_ms", source, 0, MAX_DELAY_MS, prefix, True),
        queue_pkts=_int(data, "queue_pkts", source, 4, MAX_QUEUE_PKTS, prefix=prefix),
    )
