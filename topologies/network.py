"""Build a Fabric as a Mininet network, and write the resolved topology file.

`FabricTopo` is a pure Mininet graph (nothing starts when it is built): hosts, switches
and links with the port numbers, interface names and MACs of the addressing plan.
`start_network()` creates it with the node classes of the chosen data plane, shapes
every link with tc, and returns the started Mininet object; the caller owns stopping it
(the experiment runner does so in `finally`).
"""

from __future__ import annotations

import json
from pathlib import Path

from mininet.link import Link
from mininet.net import Mininet
from mininet.topo import Topo

from controller.kernel import apply
from topologies.addressing import host_address
from topologies.linkstate import LinkState
from topologies.model import Fabric
from topologies.nodes import FabricHost, KernelRouter
from topologies.shaping import ShapingFeatures, tc_commands


class FabricTopo(Topo):
    """The Mininet graph of a Fabric. Switch nodes use `switch_cls`."""

    def build(self, fabric: Fabric, switch_cls=KernelRouter, switch_params=None):
        for host in fabric.hosts:
            plane_ports = [(p.number, p.intf, p.peer_mac) for p in fabric.ports(host.name)]
            self.addHost(host.name, cls=FabricHost, ip=None,
                         address=host_address(host.index), plane_ports=plane_ports)
        for switch in fabric.switches:
            params = (switch_params or {}).get(switch.name, {})
            if issubclass(switch_cls, KernelRouter):
                self.addHost(switch.name, cls=switch_cls, ip=None, **params)
            else:
                self.addSwitch(switch.name, cls=switch_cls, **params)
        for link in fabric.links:
            a = fabric.ports(link.a)[link.a_port]
            b = fabric.ports(link.b)[link.b_port]
            self.addLink(link.a, link.b, port1=a.number, port2=b.number,
                         intfName1=a.intf, intfName2=b.intf, addr1=a.mac, addr2=b.mac)


def shape_links(net: Mininet, fabric: Fabric, features: ShapingFeatures,
                ecn: bool = True, hosts_only: bool = False) -> int:
    """Apply rate, queue, delay and ECN to both ends of every link (or to the host ends
    only, when the switches queue by themselves). Returns the tc commands run."""
    count = 0
    nodes = fabric.hosts if hosts_only else (*fabric.hosts, *fabric.switches)
    for name in [n.name for n in nodes]:
        node = net.get(name)
        for port in fabric.ports(name):
            params = fabric.link_params(port.tier)
            # Only fabric (T0-T1) ports mark: host ports and last hops never do.
            marks = ecn and port.tier == "t0_t1"
            threshold = fabric.spec.ecn_threshold_pkts if marks else None
            count += apply(tc_commands(port.intf, params, threshold, features), node.cmd, name)
    return count


def link_state(net: Mininet) -> LinkState:
    """The network's netlink link-state setter, with a socket in every node's namespace."""
    state = getattr(net, "link_state", None)
    if state is None:
        state = net.link_state = LinkState()
        for node in net.hosts + net.switches:
            state.open(node.pid)
    return state


def set_link(net: Mininet, a: str, b: str, up: bool) -> None:
    """Set both ends of the link between nodes a and b down or up (the link-flap primitive).

    Both ends change within microseconds, over rtnetlink (topologies/linkstate.py), as
    when a cable is cut. Coming up, each end that keeps static configuration restores
    that port's entries.
    """
    links = net.linksBetween(net.get(a), net.get(b))
    if not links:
        raise ValueError(f"no link between {a} and {b}")
    state = link_state(net)
    for link in links:
        for intf in (link.intf1, link.intf2):
            state.set(intf.node.pid, intf.name, up)
    if up:
        for link in links:
            for intf in (link.intf1, link.intf2):
                restore = getattr(intf.node, "restore_port", None)
                if restore:
                    restore(intf.name)


def start_network(fabric: Fabric, switch_cls=KernelRouter, switch_params=None) -> Mininet:
    """Create and start the Mininet network (the caller must stop it)."""
    topo = FabricTopo(fabric, switch_cls=switch_cls, switch_params=switch_params)
    net = Mininet(topo=topo, controller=None, link=Link, autoSetMacs=False,
                  autoStaticArp=False, build=False)
    net.build()
    net.start()
    link_state(net)  # ready before any fault, so the first is as quick as the others
    return net


def stop_network(net: Mininet) -> None:
    """Stop the network, also when a Ctrl-C cut a node's command short."""
    for node in net.hosts + net.switches:
        if node.shell and node.waiting:
            node.sendInt()
            node.waitOutput()
    # Netlink sockets hold their namespaces alive: close them before the nodes go.
    state = getattr(net, "link_state", None)
    if state is not None:
        state.close()
    net.stop()


def resolved_topology(fabric: Fabric, extra: dict | None = None) -> dict:
    """What agents and tools need without importing Mininet: nodes, ports, uSIDs, MACs."""
    nodes = {}
    for n in (*fabric.hosts, *fabric.switches):
        nodes[n.name] = {
            "role": n.role,
            "usid": f"{n.usid:#06x}",
            "ports": [
                {"port": p.number, "intf": p.intf, "mac": p.mac, "peer": p.peer,
                 "peer_port": p.peer_port, "tier": p.tier}
                for p in fabric.ports(n.name)
            ],
        }
        if n.role == "host":
            nodes[n.name]["address"] = host_address(n.index)
        else:
            nodes[n.name]["plane"] = n.plane
    doc = {"topology": fabric.name, "source": fabric.spec.source, "nodes": nodes}
    doc.update(extra or {})
    return doc


def write_resolved_topology(path: Path, fabric: Fabric, extra: dict | None = None) -> None:
    path.write_text(json.dumps(resolved_topology(fabric, extra), indent=1))
