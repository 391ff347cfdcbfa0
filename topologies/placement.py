"""Where each node of a fabric runs: a cluster file (`make run-experiment SERVERS=...`).

A fabric runs on this machine (the head) unless a cluster file places some of it on
other servers. MRC's planes are separate networks that meet only at the hosts' NICs, so
the file places whole planes (every switch of the plane) and hosts:

    # three namespace servers on this machine (make nsservers NAMES="hosts a b")
    servers:
      hosts: {namespace: true, hosts: all}
      a: {namespace: true, planes: [0, 1, 2, 3]}
      b: {namespace: true, planes: [4, 5, 6, 7]}

A server is either a namespace server of this machine (`namespace: true`, started
beforehand by `make nsservers`: topologies/nsserver.py) or a real machine (`ssh:
root@192.0.2.12`, with `address:` and `device:`, the IPv4 address and the interface
its tunnels cross). What no server holds stays on the head; a head that holds nodes
linked to a real server's says where its own tunnels leave (`head: {address: ...,
device: ...}`). The links between two servers (the host-NIC links of a plane held apart
from its hosts) are VXLAN tunnels (topologies/tunnels.py).

`load_placement()` checks the file (one line naming the file, the field and the fix
for any mistake) and finds its servers; `Placement.where()` says on which server each
node of a given fabric runs (a run may build a second fabric, the single-plane twin, on
the same servers); `as_dict()` is what the run's topology.json records. Every cluster
file's mistake is a `PlacementError`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from topologies import nsserver
from topologies.errors import UserError, shown
from topologies.model import Fabric, read_yaml

HEAD = "head"  # where what no server holds runs: this machine's root namespace
FIX_START = "start from topologies/servers/3-namespace.yaml (docs/scale-out.md)"


class PlacementError(UserError):
    """A cluster file is missing, unreadable or invalid, or names a server that does
    not answer. The message is one line."""


@dataclass(frozen=True)
class Server:
    """A server of the cluster and what it holds. `ssh`: the command line (destination
    last) that reaches it as root; `address` and `device`: where its tunnels leave it."""

    name: str
    ssh: tuple[str, ...]
    address: str
    device: str
    planes: tuple[int, ...] = ()
    hosts: tuple[str, ...] | None = ()  # None: every host
    namespace: bool = False


@dataclass(frozen=True)
class Endpoint:
    """Where the tunnels of the head leave it."""

    address: str
    device: str


@dataclass(frozen=True)
class Placement:
    """The servers of a cluster file and what each holds; the head holds the rest."""

    source: str
    servers: tuple[Server, ...]
    head: Endpoint | None

    def where(self, fabric: Fabric) -> dict[str, Server | None]:
        """Each node of `fabric` -> the server it runs on (None: the head)."""
        found: dict[str, Server | None] = {n.name: None for n in (*fabric.hosts, *fabric.switches)}
        for server in self.servers:
            for switch in fabric.switches:
                if switch.plane in server.planes:
                    found[switch.name] = server
            for host in fabric.hosts:
                if server.hosts is None or host.name in server.hosts:
                    found[host.name] = server
        return found

    def endpoint(self, server: Server | None) -> Endpoint:
        """Where tunnels leave `server` (None: the head)."""
        if server is not None:
            return Endpoint(server.address, server.device)
        if self.head is None:
            raise PlacementError(self.source, "head", "the head holds nodes linked to "
                                 "another server's, but the file does not say where its "
                                 "tunnels leave it", "add head: {address: <its IPv4 "
                                 "address>, device: <its interface>}")
        return self.head

    def as_dict(self, fabric: Fabric) -> dict:
        """What the run's topology.json records: the file, each server, each node's."""
        where = self.where(fabric)
        return {"source": self.source,
                "servers": {s.name: {"address": s.address, "device": s.device,
                                     "namespace": s.namespace, "planes": list(s.planes),
                                     "hosts": "all" if s.hosts is None else list(s.hosts)}
                            for s in self.servers},
                "nodes": {name: HEAD if s is None else s.name for name, s in where.items()}}


_SERVER_FIELDS = {"namespace", "ssh", "address", "device", "planes", "hosts"}
_TOP_FIELDS = {"servers", "head"}


def load_placement(path: str | Path, fabric: Fabric,
                   harness: nsserver.NamespaceServers | None = None) -> Placement:
    """Read and check the cluster file at `path` against `fabric` (the run's own);
    `harness`: the namespace servers' (the machine's, unless a test gives its own)."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise PlacementError(source, "SERVERS", "no such cluster file",
                             f"give the path of a cluster YAML file; {FIX_START}")
    data = read_yaml(path, PlacementError)
    if not isinstance(data, dict) or not isinstance(data.get("servers"), dict) \
            or not data["servers"]:
        raise PlacementError(source, "servers", "must be a mapping of server names to "
                             "what each holds", FIX_START)
    unknown = sorted(set(map(str, data)) - _TOP_FIELDS)
    if unknown:
        raise PlacementError(source, unknown[0], "unknown field",
                             f"remove it; known fields are {', '.join(sorted(_TOP_FIELDS))}")
    namespaces = None  # asked of the harness once, when a namespace server is named
    servers, planes_of, hosts_of = [], {}, {}
    for name, raw in data["servers"].items():
        field = f"servers.{name}"
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum() \
                or name == HEAD:
            raise PlacementError(source, field, f"a server's name is letters, digits, '-' "
                                 f"or '_', and not '{HEAD}' (got {shown(name)})",
                                 "rename it, e.g. planes-a")
        if not isinstance(raw, dict):
            raise PlacementError(source, field, "must be a mapping", FIX_START)
        unknown = sorted(set(map(str, raw)) - _SERVER_FIELDS)
        if unknown:
            raise PlacementError(source, f"{field}.{unknown[0]}", "unknown field",
                                 f"remove it; known fields are {', '.join(sorted(_SERVER_FIELDS))}")
        planes = _planes(raw.get("planes", []), f"{field}.planes", source, fabric)
        hosts = _hosts(raw.get("hosts", []), f"{field}.hosts", source, fabric)
        if not planes and hosts == ():
            raise PlacementError(source, field, "holds no plane and no host",
                                 "give it planes: [...] or hosts: [...], or remove it")
        for plane in planes:
            if plane in planes_of:
                raise PlacementError(source, f"{field}.planes", f"plane {plane} is already "
                                     f"on {planes_of[plane]}", "give each plane one server")
            planes_of[plane] = name
        for host in fabric.hosts if hosts is None else [fabric.node(h) for h in hosts]:
            if host.name in hosts_of:
                raise PlacementError(source, f"{field}.hosts", f"{host.name} is already on "
                                     f"{hosts_of[host.name]}", "give each host one server")
            hosts_of[host.name] = name
        if raw.get("namespace") is True:
            if "ssh" in raw:
                raise PlacementError(source, f"{field}.ssh", "a namespace server is reached "
                                     "by its harness", "remove ssh, or namespace: true")
            if namespaces is None:
                harness = harness or nsserver.NamespaceServers()
                namespaces = {s.name: s for s in harness.running()}
            found = namespaces.get(name)
            if found is None:
                raise PlacementError(source, field, f"no namespace server {name} runs "
                                     "on this machine", "start it first: make nsservers "
                                     f"NAMES=\"{' '.join(map(str, data['servers']))}\"")
            servers.append(Server(name, tuple(harness.ssh_argv(found)),
                                  found.address, nsserver.SERVER_DEVICE, planes, hosts, True))
        elif "ssh" in raw:
            ssh = raw["ssh"]
            if not isinstance(ssh, str) or not ssh.strip() or " " in ssh.strip():
                raise PlacementError(source, f"{field}.ssh", f"must be an ssh destination "
                                     f"(got {shown(ssh)})", "e.g. ssh: root@192.0.2.12")
            servers.append(Server(name, ("ssh", "-o", "BatchMode=yes", "-o",
                                         "ControlMaster=auto", "-o",
                                         "ControlPath=/run/mrc-ssh-%C", "-o",
                                         "ControlPersist=60", ssh.strip()),
                                  _address(raw, field, source), _device(raw, field, source),
                                  planes, hosts))
        else:
            raise PlacementError(source, field, "says neither how to reach it",
                                 "add namespace: true (a namespace server of this "
                                 "machine) or ssh: root@<address>")
    # The agents stamp their events with their machine's monotonic clock, and the run
    # times its transfers and faults against its own: the hosts stay on this machine
    # (or its namespace servers, which share its clock); real servers hold planes.
    remote_hosts = sorted({hosts_of[h.name] for h in fabric.hosts if hosts_of.get(h.name)
                           in {s.name for s in servers if not s.namespace}})
    if remote_hosts:
        raise PlacementError(source, f"servers.{remote_hosts[0]}.hosts", "hosts on a real "
                             "server would time their events by its clock, which this "
                             "machine's (the run's) does not share", "keep the hosts on this "
                             "machine or its namespace servers; put planes on real servers")
    head = data.get("head")
    if head is not None:
        if not isinstance(head, dict):
            raise PlacementError(source, "head", "must be a mapping",
                                 "head: {address: <IPv4 address>, device: <interface>}")
        head = Endpoint(_address(head, "head", source), _device(head, "head", source))
    elif all(s.namespace for s in servers):
        head = Endpoint(nsserver.HEAD, nsserver.BRIDGE)  # the namespace servers' bridge
    return Placement(source, tuple(servers), head)


def _planes(raw: object, field: str, source: str, fabric: Fabric) -> tuple[int, ...]:
    count = fabric.spec.planes
    if raw == "all":
        return tuple(range(count))
    if not isinstance(raw, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                            and 0 <= p < count for p in raw):
        raise PlacementError(source, field, f"must be a list of plane numbers from 0 to "
                             f"{count - 1}, or all (got {shown(raw)})", "e.g. planes: [0, 1]")
    return tuple(raw)


def _hosts(raw: object, field: str, source: str, fabric: Fabric) -> tuple[str, ...] | None:
    if raw == "all":
        return None
    names = {h.name for h in fabric.hosts}
    if not isinstance(raw, list) or not all(isinstance(h, str) and h in names for h in raw):
        raise PlacementError(source, field, f"must be a list of the fabric's host names "
                             f"(h0 to h{len(names) - 1}), or all (got {shown(raw)})",
                             "e.g. hosts: [h0, h1]")
    return tuple(raw)


def _address(raw: dict, field: str, source: str) -> str:
    try:
        return str(ipaddress.IPv4Address(raw.get("address")))
    except ValueError:
        raise PlacementError(source, f"{field}.address", f"must be the IPv4 address "
                             f"tunnels reach it at (got {shown(raw.get('address'))})",
                             "e.g. address: 192.0.2.12") from None


def _device(raw: dict, field: str, source: str) -> str:
    device = raw.get("device")
    if not isinstance(device, str) or not device or len(device) > 15 or " " in device:
        raise PlacementError(source, f"{field}.device", f"must be the interface its "
                             f"tunnels leave by (got {shown(device)})", "e.g. device: eth1")
    return device
