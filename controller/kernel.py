"""The `ip` commands of the fabric's Linux nodes: static tables -> Linux SRv6 routes.

Each kernel-target switch is a Linux router in its own network namespace:
- its own uSID is a `seg6local` route with action `End` and the NEXT-C-SID flavor
  (Linux >= 6.1), which shifts the uSID list behind the 32-bit block by 16 bits and
  looks the new destination up again;
- each route "next active uSID -> port, next-hop MAC" is a /48 route via the fixed
  link-local next hop fe80::1 with a permanent neighbour entry holding the peer's MAC,
  so no neighbour discovery runs and the MAC comes from the addressing plan.

Hosts are Linux namespaces on every target, so their commands live here too: the
host's own address, and one route per plane that sends every path starting in that
plane's T0 out of that plane's port; for the interactive fabric, IPv4 and IPv6
addresses that Mininet's own commands use, each peer's reached over one uSID path in
SRv6 encapsulation (`host_ip_commands`).

Everything here is a pure function (tested without root). The Mininet nodes
(topologies/nodes.py) run the commands they are handed and never import this module;
the targets in experiments/ hand them over.
"""

from __future__ import annotations

from controller.tables import SwitchTables
from topologies.addressing import (
    BLOCK_BITS,
    USID_BITS,
    intf_name,
    t0_usid,
    usid_address,
    usid_prefix,
)

NEXT_HOP = "fe80::1"
# The End route needs a device that is up and never flaps: not a port (Linux deletes a
# port's routes when it goes down) and not `lo` (packets routed to lo are not forwarded).
# Each router has a private veth pair for it (`router_setup_commands()`).
ANCHOR_DEV = "usid0"
ANCHOR_PEER = "usid1"


def router_setup_commands() -> list[str]:
    """What a kernel router needs before its tables: the anchor device of its End route."""
    return [f"ip link add {ANCHOR_DEV} type veth peer name {ANCHOR_PEER}",
            f"ip link set {ANCHOR_DEV} up", f"ip link set {ANCHOR_PEER} up"]


def end_route(tables: SwitchTables) -> str:
    """The switch's own uSID: shift the uSID list and look the destination up again."""
    return (f"ip -6 route replace {usid_prefix(tables.my_usid)} encap seg6local action End "
            f"flavors next-csid lblen {BLOCK_BITS} nflen {USID_BITS} dev {ANCHOR_DEV}")


def switch_commands(tables: SwitchTables) -> list[str]:
    """The `ip` commands that install one switch's static tables."""
    cmds = [end_route(tables)]
    for route in tables.routes:
        dev = intf_name(tables.switch, route.port)
        cmds.append(f"ip -6 neigh replace {NEXT_HOP} lladdr {route.next_hop_mac} "
                    f"dev {dev} nud permanent")
        cmds.append(f"ip -6 route replace {usid_prefix(route.usid)} via {NEXT_HOP} dev {dev}")
    return cmds


def blackhole_commands(tables: SwitchTables, on: bool) -> list[str]:
    """Silently drop everything addressed to the switch (its links stay up), or stop:
    the End route is replaced by a blackhole route for the same prefix, and back."""
    if on:
        return [f"ip -6 route replace blackhole {usid_prefix(tables.my_usid)}"]
    return [end_route(tables)]


def plane_prefix(plane: int) -> str:
    """Every path in a plane starts with a T0 uSID 0x1P.. of that plane: a /40 prefix."""
    return f"{usid_address([t0_usid(plane, 0)])}/{BLOCK_BITS + 8}"


def host_commands(address: str, plane_ports: list[tuple[int, str, str]]) -> list[str]:
    """Commands for a host: (plane, interface, peer MAC) for each plane port."""
    cmds = [f"ip -6 addr replace {address}/128 dev lo"]
    for plane, intf, peer_mac in plane_ports:
        cmds.append(f"ip -6 neigh replace {NEXT_HOP} lladdr {peer_mac} dev {intf} nud permanent")
        cmds.append(f"ip -6 route replace {plane_prefix(plane)} via {NEXT_HOP} dev {intf}")
    return cmds


# What host_ip_commands' encapsulation adds to a packet: the outer IPv6 header and a
# segment routing header of one segment.
SEG6_ENCAP_BYTES = 40 + 8 + 16


def host_ip_commands(usid_addr: str, ipv4: str, ipv6: str, ports: list[str],
                     peers: list[tuple[str, str, str, str]]) -> list[str]:
    """A host's IPv4 and IPv6 addresses besides its uSID address `usid_addr`, and a
    route to each peer's over a uSID path: what Mininet's own commands (ping, iperf)
    need on a fabric whose switches forward uSID packets alone.

    `ports`: the host's ports; `peers`: (peer IPv4, peer IPv6, path address, port) each.
    A packet to a peer is encapsulated in an outer IPv6 header from `usid_addr` to the
    path's address, with a segment routing header of that one segment (seg6 `encap`),
    and leaves by the path's port like any uSID packet. The switches shift the outer
    address, whatever it carries; the peer decapsulates it (the kernel's own rule for a
    segment routing header with no segment left, where `seg6_enabled` is set on the
    port it came in on) and receives the inner packet on its address. The addresses sit
    on `lo`, with the uSID address.

    An inner packet must fit in the port's MTU less SEG6_ENCAP_BYTES (the routes' MTU,
    which TCP sizes its segments by): the kernel encapsulates a larger one whole, and
    the outer packet's fragments are put together at the peer only after the point
    where it would have been decapsulated."""
    cmds = [f"ip addr replace {ipv4}/32 dev lo", f"ip -6 addr replace {ipv6}/128 dev lo",
            f"ip sr tunsrc set {usid_addr}",
            "sysctl -qw net.ipv6.conf.all.seg6_enabled=1 "
            + " ".join(f"net.ipv6.conf.{port}.seg6_enabled=1" for port in ports)]
    for peer4, peer6, path, port in peers:
        encap = f"encap seg6 mode encap segs {path} dev {port}"
        cmds.append(f"ip route replace {peer4}/32 {encap} src {ipv4}")
        cmds.append(f"ip -6 route replace {peer6}/128 {encap} src {ipv6}")
    return cmds


def commands_for_intf(commands: list[str], intf: str) -> list[str]:
    """The commands that name one interface: what Linux flushed when it went down.

    Linux deletes a port's routes and neighbour entries when the port is set down. A
    switch keeps its static configuration across a link flap, so the node puts these
    entries back when the port comes up again (this is not a table change).
    """
    return [c for c in commands if c.endswith(f" dev {intf}") or f" dev {intf} " in c]


def by_interface(commands: list[str], intfs: list[str]) -> dict[str, list[str]]:
    """For each interface, the commands that put its entries back (`commands_for_intf`);
    interfaces that no command names are left out."""
    groups = {intf: commands_for_intf(commands, intf) for intf in intfs}
    return {intf: cmds for intf, cmds in groups.items() if cmds}
