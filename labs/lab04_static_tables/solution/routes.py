"""Lab 04, solution: one switch's next-uSID table, from the addressing and port rules.

A T0 of rack r faces the rack's hosts on ports 0 .. hosts_per_rack-1 and the T1s of its
plane on the ports after them; a T1 faces the T0 of rack r on port r.
"""

from __future__ import annotations

from topologies.addressing import host_usid, t0_usid, t1_usid
from topologies.model import Fabric, Switch


def routes(fabric: Fabric, switch: Switch) -> dict[int, int]:
    """The switch's next-uSID table: next active uSID -> egress port."""
    spec = fabric.spec
    table: dict[int, int] = {}
    if switch.role == "t0":
        rack, plane = switch.index, switch.plane
        for i in range(spec.hosts_per_rack):
            table[host_usid(rack * spec.hosts_per_rack + i)] = i
        for spine in range(spec.t1_per_plane):
            table[t1_usid(plane, spine)] = spec.hosts_per_rack + spine
    else:
        plane = switch.plane
        for rack in range(spec.racks):
            table[t0_usid(plane, rack)] = rack
    return table
