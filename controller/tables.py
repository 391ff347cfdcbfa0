"""The static switch tables: a pure function of the topology, neutral to the data plane.

Every switch gets:
- `my_usid`: the uSID it answers to (shift-and-forward when it is the active uSID);
- `routes`: next active uSID -> egress port and next-hop MAC;
- `ports`: each port's role (host-facing or fabric), used for ECN (never marked on the
  last hop) and for the queue settings.

The kernel target turns these into `ip -6 route` entries (controller/kernel.py), the
BMv2 target into P4Runtime table entries. Both read the same objects, so a path that
works on one works on the other. The entries are computed once and never change.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.model import Fabric, Switch


@dataclass(frozen=True)
class Route:
    usid: int  # the active uSID after the shift
    port: int  # egress port
    next_hop_mac: str
    next_hop: str  # the neighbour's node name (for logs)


@dataclass(frozen=True)
class PortRole:
    port: int
    mac: str
    peer: str
    host_facing: bool


@dataclass(frozen=True)
class SwitchTables:
    switch: str
    my_usid: int
    routes: tuple[Route, ...]
    ports: tuple[PortRole, ...]
    ecn_threshold_pkts: int
    trim_threshold_pkts: int

    @property
    def entry_count(self) -> int:
        """Table entries this switch needs: one my-SID entry, the routes, the port roles."""
        return 1 + len(self.routes) + len(self.ports)


def switch_tables(fabric: Fabric, switch: Switch) -> SwitchTables:
    """A switch routes to each neighbour's uSID through the port facing it: a T0 to its
    hosts and to the T1s of its plane, a T1 to the T0s of its plane."""
    ports = fabric.ports(switch.name)
    routes = tuple(
        Route(fabric.node(p.peer).usid, p.number, p.peer_mac, p.peer) for p in ports
    )
    roles = tuple(PortRole(p.number, p.mac, p.peer, p.tier == "host_t0") for p in ports)
    return SwitchTables(switch.name, switch.usid, routes, roles,
                        fabric.spec.ecn_threshold_pkts, fabric.spec.trim_threshold_pkts)


def all_tables(fabric: Fabric) -> dict[str, SwitchTables]:
    return {s.name: switch_tables(fabric, s) for s in fabric.switches}
