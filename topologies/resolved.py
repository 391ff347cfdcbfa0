"""The resolved topology file (`topology.json`): the fabric as tools see it, without Mininet.

A run writes it into its results folder once the network is up: the topology's
numbers as the run built them (`spec`: planes, racks, link rates after any cap, queue
and marking thresholds), and every node's role, index, uSID, plane or address, and
ports (number, interface, MAC, peer and peer port, tier). Tools that must not import
Mininet or re-derive the addressing plan (packet dissectors, labs, analysis scripts)
read it back with `read_resolved_topology()`; the host agents rebuild the run's own
Fabric from it with `read_fabric()`, so that an agent works on the very fabric the run
built (a capped rate, the single-plane twin) and never on the topology file's.

    {"topology": "2tier-2plane", "source": "topologies/2tier-2plane.yaml",
     "dataplane": "kernel",
     "spec": {"name": "2tier-2plane", "planes": 2, "racks": 2, ..., "links": {
               "host_t0": {"rate_mbit": 20.0, "delay_ms": 0.5, "queue_pkts": 64}, ...}},
     "nodes": {"h0": {"role": "host", "index": 0, "usid": "0x8000",
                      "address": "fcbb:bb00:8000::", "ports": [
                        {"port": 0, "intf": "h0-eth0", "mac": "02:00:80:00:00:00",
                         "peer": "p0t0r0", "peer_port": 0, "tier": "host_t0"}, ...]},
               "p0t0r0": {"role": "t0", "index": 0, "usid": "0x1000", "plane": 0, ...}}}

This module is the file's one home: `resolved_topology()` builds its content from a
Fabric (pure), `write_resolved_topology()` writes it, `read_resolved_topology()` checks
and loads it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from hosts.protocol import CLASS_NAMES
from topologies.addressing import host_address
from topologies.errors import UserError, shown
from topologies.model import TIERS, Fabric, TopologyError, build_fabric, parse_spec

ROLES = ("host", "t0", "t1")
FIX = "use the topology.json a run wrote into its results folder"


class ResolvedTopologyError(UserError):
    """A topology.json that cannot be read or is not what a run writes."""


@dataclass(frozen=True)
class ResolvedPort:
    port: int
    intf: str
    mac: str
    peer: str
    peer_port: int
    tier: str  # "host_t0" or "t0_t1"


@dataclass(frozen=True)
class ResolvedNode:
    name: str
    role: str  # "host", "t0" or "t1"
    index: int  # host index, T0 rack or T1 spine number
    usid: int
    ports: tuple[ResolvedPort, ...]
    address: str | None = None  # hosts: the IPv6 address
    plane: int | None = None  # switches: their plane


@dataclass(frozen=True)
class ResolvedTopology:
    name: str
    source: str  # the topology YAML it was built from
    dataplane: str | None
    nodes: dict[str, ResolvedNode]

    def by_usid(self, usid: int) -> ResolvedNode | None:
        return next((n for n in self.nodes.values() if n.usid == usid), None)

    def by_mac(self, mac: str) -> tuple[ResolvedNode, ResolvedPort] | None:
        """The node and port that own a MAC address (any case)."""
        mac = mac.lower()
        for node in self.nodes.values():
            for port in node.ports:
                if port.mac == mac:
                    return node, port
        return None


def resolved_topology(fabric: Fabric, dataplane: str | None = None,
                      placement: dict | None = None) -> dict:
    """The content of topology.json for `fabric`, as plain JSON data; `placement`:
    where its nodes ran, when not all on one machine (topologies/placement.py
    `Placement.as_dict`), recorded as each node's `server` and the file's `placement`."""
    nodes = {}
    for n in (*fabric.hosts, *fabric.switches):
        node = {
            "role": n.role,
            "index": n.index,
            "usid": f"{n.usid:#06x}",
            "ports": [{"port": p.number, "intf": p.intf, "mac": p.mac, "peer": p.peer,
                       "peer_port": p.peer_port, "tier": p.tier}
                      for p in fabric.ports(n.name)],
        }
        if n.role == "host":
            node["address"] = host_address(n.index)
        else:
            node["plane"] = n.plane
        if placement is not None:
            node["server"] = placement["nodes"][n.name]
        nodes[n.name] = node
    doc: dict = {"topology": fabric.name, "source": fabric.spec.source}
    if dataplane is not None:
        doc["dataplane"] = dataplane
    doc["spec"] = spec_document(fabric)
    if placement is not None:
        doc["placement"] = {k: v for k, v in placement.items() if k != "nodes"}
    doc["nodes"] = nodes
    return doc


def spec_document(fabric: Fabric) -> dict:
    """The topology's numbers as a topology file writes them (topologies/model.py reads
    this shape), at the rates and thresholds the fabric has."""
    spec = fabric.spec
    trimming = {"size_bytes": spec.trim_size_bytes,
                "dscp": "asymmetric" if spec.trim_asymmetric else "symmetric"}
    if spec.priority_share is not None:
        trimming["priority_share"] = spec.priority_share
    return {"name": spec.name, "planes": spec.planes, "racks": spec.racks,
            "hosts_per_rack": spec.hosts_per_rack, "t1_per_plane": spec.t1_per_plane,
            "mtu_payload": spec.mtu_payload,
            "links": {tier: dataclasses.asdict(fabric.link_params(tier)) for tier in TIERS},
            "ecn_threshold_pkts": spec.ecn_threshold_pkts,
            "ecn_kmax_pkts": spec.ecn_kmax,
            "trim_threshold_pkts": spec.trim_threshold_pkts,
            "trim_lasthop_pkts": spec.trim_lasthop,
            "traffic_classes": dict(zip(CLASS_NAMES, spec.traffic_classes)),
            "trimming": trimming}


def read_fabric(path: Path | str) -> Fabric:
    """The Fabric a run built, rebuilt from its topology.json: the spec by the same rule
    as a topology file, its nodes checked against the file's (a file edited by hand, or
    written by another version, is refused rather than half believed)."""
    source = str(path)
    topo = read_resolved_topology(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        fabric = build_fabric(dataclasses.replace(parse_spec(doc.get("spec"), source),
                                                  source=topo.source))
    except TopologyError as err:
        raise ResolvedTopologyError(source, f"spec.{err.field}", err.problem, FIX) from None
    for node in (*fabric.hosts, *fabric.switches):
        found = topo.nodes.get(node.name)
        if found is None or (found.role, found.index, found.usid) != (node.role, node.index,
                                                                      node.usid):
            raise ResolvedTopologyError(source, f"nodes.{node.name}", "does not match the "
                                        "fabric its spec builds", FIX)
    if len(topo.nodes) != len(fabric.hosts) + len(fabric.switches):
        raise ResolvedTopologyError(source, "nodes", "holds nodes its spec does not build", FIX)
    return fabric


def write_resolved_topology(path: Path, fabric: Fabric, dataplane: str | None = None,
                            placement: dict | None = None) -> None:
    path.write_text(json.dumps(resolved_topology(fabric, dataplane, placement), indent=1)
                    + "\n")


def read_resolved_topology(path: Path | str) -> ResolvedTopology:
    """Load a topology.json; anything that is not what a run writes is an error."""
    source = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ResolvedTopologyError(source, "file", f"cannot be read ({err.strerror or err})",
                                    FIX) from None
    except (UnicodeDecodeError, ValueError):
        raise ResolvedTopologyError(source, "file", "is not JSON text", FIX) from None
    top = _Fields(doc, "", source)
    nodes = {}
    raw_nodes = top.get("nodes", dict)
    for name, raw in raw_nodes.items():
        node = _Fields(raw, f"nodes.{name}", source)
        role = node.get("role", str)
        if role not in ROLES:
            raise ResolvedTopologyError(source, f"nodes.{name}.role",
                                        f"unknown role {shown(role)}", FIX)
        usid_text = node.get("usid", str)
        try:
            usid = int(usid_text, 16)
        except ValueError:
            raise ResolvedTopologyError(source, f"nodes.{name}.usid", f"not a hex number "
                                        f"(got {shown(usid_text)})", FIX) from None
        ports = []
        for i, raw_port in enumerate(node.get("ports", list)):
            port = _Fields(raw_port, f"nodes.{name}.ports[{i}]", source)
            tier = port.get("tier", str)
            if tier not in TIERS:
                raise ResolvedTopologyError(source, f"nodes.{name}.ports[{i}].tier",
                                            f"unknown tier {shown(tier)}", FIX)
            ports.append(ResolvedPort(port.get("port", int), port.get("intf", str),
                                      port.get("mac", str), port.get("peer", str),
                                      port.get("peer_port", int), tier))
        is_host = role == "host"
        nodes[name] = ResolvedNode(
            name, role, node.get("index", int), usid, tuple(ports),
            address=node.get("address", str) if is_host else None,
            plane=None if is_host else node.get("plane", int))
    for node in nodes.values():
        for i, port in enumerate(node.ports):
            if port.peer not in nodes:
                raise ResolvedTopologyError(source, f"nodes.{node.name}.ports[{i}].peer",
                                            f"{shown(port.peer)} is not a node of the file", FIX)
    dataplane = top.get("dataplane", str) if "dataplane" in doc else None
    return ResolvedTopology(top.get("topology", str), top.get("source", str), dataplane, nodes)


class _Fields:
    """Typed access to one JSON object of the file, naming the field on error."""

    def __init__(self, value: object, where: str, source: str):
        if not isinstance(value, dict):
            raise ResolvedTopologyError(source, where, f"must be an object (got {shown(value)})",
                                        FIX)
        self.value, self.where, self.source = value, where, source

    def get(self, key: str, kind: type):
        value = self.value.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            where = f"{self.where}.{key}" if self.where else key
            raise ResolvedTopologyError(self.source, where, f"must be "
                                        f"{kind.__name__} (got {shown(value)})", FIX)
        return value
