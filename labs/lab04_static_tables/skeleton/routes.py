"""Lab 04: one switch's next-uSID table, from the addressing and port rules alone.

A switch that shifted its own uSID out looks the next active uSID up in this table to
find the egress port. Complete `routes` (TODO 2 and TODO 3) without reading the fabric's
ports: use the port plan of docs/addressing.md and topologies/model.py (build_fabric):

  - a T0 of plane p, rack r: ports 0 .. hosts_per_rack-1 face the rack's hosts in
    order, then one uplink per T1 of its plane (spine 0 first);
  - a T1 of plane p: port r faces the T0 of rack r.

The check compares your table with the controller's (controller/tables.py) for every
switch of your topology and of 2tier-8plane, then walks every path of the catalogue
through your tables.
"""

from __future__ import annotations

from topologies.addressing import host_usid, t0_usid, t1_usid  # noqa: F401 - for the TODOs
from topologies.model import Fabric, Switch


def routes(fabric: Fabric, switch: Switch) -> dict[int, int]:
    """The switch's next-uSID table: next active uSID -> egress port."""
    spec = fabric.spec  # noqa: F841 - planes, racks, hosts_per_rack, t1_per_plane
    table: dict[int, int] = {}
    if switch.role == "t0":
        # TODO 2: switch.index is the rack, switch.plane the plane. Add the hosts of
        # this rack (host index = rack * spec.hosts_per_rack + i; host_usid gives the
        # uSID) and the T1s of this plane (t1_usid).
        pass
    else:
        # TODO 3: the T0 of every rack of this plane (t0_usid).
        pass
    return table
