"""The links of a fabric that cross from one server to another: VXLAN tunnels.

A link whose two nodes run on different servers (topologies/placement.py) cannot be a
veth pair: each end is made on its node's server instead, as a VXLAN device that sends
to the other end's server, made straight into its node's namespace with the port's
name, MAC and MTU (its UDP socket stays in the server's own namespace), so that the
node sees a port like any other and the end goes with the node. Each link has its own VXLAN
network identifier (its position in the fabric's links, plus one), so every tunnel of a
server shares one UDP port.

VXLAN, not GRE: this machine's kernel (and CI's) has no Ethernet-over-GRE devices
(`gretap`), and every stock Debian and Ubuntu kernel has VXLAN. Its headers take
`OVERHEAD` bytes of the path between the servers, so that path's MTU must be the
fabric's plus that; `check_mtu()` says, before anything is built, which link would not
fit, where a tunnel would otherwise fragment or drop its largest frames without a word.
Generic receive offload is off on every tunnel end: merging a train of sprayed packets
into one would hand a switch one packet where the fabric carried several.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from topologies.errors import UserError
from topologies.links import FabricLink
from topologies.placement import Endpoint, Placement, Server
from topologies.remote import over_ssh

# Outer IPv4 (20), UDP (8) and VXLAN (8) headers, and the inner Ethernet header (14).
OVERHEAD = 50
VXLAN_PORT = 4789  # IANA's


class TunnelError(UserError):
    """The path between two servers cannot carry a crossing link's frames."""


@dataclass(frozen=True)
class Tunnel:
    """A crossing link's tunnel: its VXLAN identifier, the server of each end (None: the
    head) and where each end leaves it."""

    vni: int
    server1: Server | None  # the first node's
    server2: Server | None
    end1: Endpoint
    end2: Endpoint


def tunnels(placement: Placement, fabric) -> dict[tuple[str, str], Tunnel]:
    """(a, b) -> the tunnel of every link of `fabric` whose nodes run on two servers."""
    where = placement.where(fabric)
    found = {}
    for number, link in enumerate(fabric.links, start=1):
        a, b = where[link.a], where[link.b]
        if a is not b:
            found[(link.a, link.b)] = Tunnel(number, a, b, placement.endpoint(a),
                                             placement.endpoint(b))
    return found


def check_mtu(placement: Placement, fabric, device_mtu=None) -> None:
    """Raise TunnelError naming the first crossing link whose frames (the fabric's MTU
    plus OVERHEAD) would not fit the device a tunnel end leaves by. `device_mtu(server)`
    reads that device's MTU on `server` (None: the head); by default, on the server."""
    where = placement.where(fabric)
    if device_mtu is None:  # read on every server of a crossing link, at once
        ends = _crossing_servers(where, fabric)
        with ThreadPoolExecutor(max_workers=max(1, len(ends))) as pool:
            found = dict(zip([id(s) for s in ends], pool.map(lambda server: _mtu(on_server(
                server, f"ip -o link show dev {placement.endpoint(server).device}")), ends)))
        device_mtu = lambda server: found[id(server)]  # noqa: E731
    needed = fabric.spec.interface_mtu + OVERHEAD
    seen: dict[str, int] = {}
    for link in fabric.links:
        a, b = where[link.a], where[link.b]
        if a is b:
            continue
        for server in (a, b):
            name = "head" if server is None else server.name
            if name not in seen:
                seen[name] = device_mtu(server)
            if seen[name] < needed:
                end = placement.endpoint(server)
                raise TunnelError(
                    placement.source, "servers" if server is not None else "head",
                    f"link {link.a} - {link.b} crosses servers in a VXLAN tunnel needing "
                    f"MTU {needed} ({fabric.spec.interface_mtu} + {OVERHEAD}), but "
                    f"{end.device} on {name} has {seen[name]}",
                    f"raise {end.device}'s MTU to {needed} on {name}, or run with a "
                    f"smaller MTU=")


def on_server(server: Server | None, line: str, what: str = "") -> str:
    """Run a shell line (or script) on `server` (None: the head), outside any node: its
    output. Raises OSError with `what` it did (else the line's first command) and what
    the command said when it fails."""
    argv = ["sh", "-c", line] if server is None else over_ssh(server.ssh, ["sh", "-c", line])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        where = "" if server is None else f"on {server.name}: "
        raise OSError(f"{where}{what or line.split(' &&')[0]}: "
                      f"{done.stderr.strip() or done.returncode}")
    return done.stdout


def _crossing_servers(where: dict, fabric) -> list[Server | None]:
    """The servers (None: the head) at either end of a link between two servers."""
    found: dict[int, Server | None] = {}
    for link in fabric.links:
        a, b = where[link.a], where[link.b]
        if a is not b:
            found.setdefault(id(a), a)
            found.setdefault(id(b), b)
    return list(found.values())


def _mtu(line: str) -> int:
    """The MTU in a line of `ip -o link show`."""
    words = line.split()
    return int(words[words.index("mtu") + 1])


@dataclass(frozen=True)
class TunnelEnd:
    """One end of a crossing link: the node's pid on its server, the port it becomes."""

    tunnel: Tunnel
    first: bool  # the link's first node's end
    pid: int
    intf: str
    mac: str | None
    mtu: int
    index: int  # its interface index, unique over the fabric (topologies/links.py)

    @property
    def server(self) -> Server | None:
        return self.tunnel.server1 if self.first else self.tunnel.server2

    def add_line(self) -> str:
        """The `ip -batch` line that makes this end on its server, in its node."""
        here, there = ((self.tunnel.end1, self.tunnel.end2) if self.first
                       else (self.tunnel.end2, self.tunnel.end1))
        mac = f" address {self.mac}" if self.mac else ""
        return (f"link add name {self.intf} index {self.index}{mac} mtu {self.mtu} "
                f"netns {self.pid} type vxlan "
                f"id {self.tunnel.vni} local {here.address} remote {there.address} "
                f"dstport {VXLAN_PORT} dev {here.device}")


def server_script(ends: list[TunnelEnd]) -> str:
    """The shell script that makes `ends` (all of one server) in their nodes: every
    device in one `ip -batch`, made in its node's namespace under its port's name,
    then GRO off, one shell in each node. Made in the server's own namespace and moved,
    each end cost a grace period of the kernel's (tens of milliseconds): seconds of a
    split fabric's bring-up."""
    lines = ["set -e", "ip -batch - <<'END'"] + [end.add_line() for end in ends] + ["END"]
    by_node: dict[int, list[str]] = {}
    for end in ends:
        by_node.setdefault(end.pid, []).append(end.intf)
    for pid, intfs in by_node.items():
        gro = "; ".join(f"ethtool -K {intf} gro off" for intf in intfs)
        lines += [f"nsenter -t {pid} -n sh -c '{gro}' >/dev/null 2>&1 || true"]
    return "\n".join(lines) + "\n"


def make_ends(ends: list[TunnelEnd]) -> int:
    """Make every tunnel end, one shell command per server, the servers at once (a
    command over ssh costs tens of milliseconds: one per end took most of a split
    fabric's bring-up). Raises OSError naming the server and the line that failed."""
    by_server: dict[str, tuple[Server | None, list[TunnelEnd]]] = {}
    for end in ends:
        key = "" if end.server is None else end.server.name
        by_server.setdefault(key, (end.server, []))[1].append(end)
    with ThreadPoolExecutor(max_workers=max(1, len(by_server))) as pool:
        for done in [pool.submit(on_server, server, server_script(mine),
                                 f"making {len(mine)} tunnel ends")
                     for server, mine in by_server.values()]:
            done.result()
    return len(ends)


class CrossingLink(FabricLink):
    """A link between nodes on two servers: a VXLAN device on each server, handed to
    its node's namespace as the port (`tunnel`: its identifier and end points). Its
    ends are made with the other tunnels' (`premade`: FabricNet.buildFromTopo,
    make_ends), or here on their own."""

    def __init__(self, *args, tunnel: Tunnel, premade: bool = False, **kwargs):
        self.tunnel, self.premade = tunnel, premade
        super().__init__(*args, **kwargs)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None,  # noqa: N802
                     node1=None, node2=None, deleteIntfs=True):  # noqa: N803 - Mininet's
        if not self.premade:
            make_ends(link_ends(self.tunnel, (node1, intfname1, addr1),
                                (node2, intfname2, addr2), self.mtu))

    def in_root(self) -> str | None:
        return None  # both ends live in their nodes' namespaces


def link_ends(tunnel: Tunnel, one: tuple, two: tuple, mtu: int) -> list[TunnelEnd]:
    """The two ends of a crossing link, from (node, port name, MAC) of each side."""
    return [TunnelEnd(tunnel, first, node.pid, intf, mac, mtu, next(FabricLink.indexes))
            for first, (node, intf, mac) in ((True, one), (False, two))]
