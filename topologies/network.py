"""Build a Fabric as a Mininet network, start it, shape its links, flap them, stop it.

`FabricTopo` is a pure Mininet graph (nothing starts when it is built): hosts, switches
and links with the port numbers, interface names and MACs of the addressing plan.
`start_network()` creates it with the switch class and the per-node parameters the
data-plane target hands over (the nodes run what they are given: this module knows
no table and no controller), starts it and returns the started `FabricNet`; the caller
owns stopping it (experiments/run/fabric.py does so, also when a step fails).
`shape_links()` sets every link's rate, queue, delay and ECN with tc.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

from mininet.net import Mininet
from mininet.topo import Topo

from topologies.links import FabricLink
from topologies.linkstate import LinkState
from topologies.model import Fabric
from topologies.nodes import FabricHost, KernelRouter, StaticConfigNode, run_commands
from topologies.placement import Placement, PlacementError
from topologies.remote import is_remote, remote_class, remove_leftovers_on
from topologies.shaping import ShapingFeatures, nic_send_queue, tc_commands
from topologies.tunnels import (
    CrossingLink,
    check_mtu,
    link_ends,
    make_ends,
    tunnels,
)

NodeParams = dict[str, dict]  # node name -> keyword arguments of its node class
# Node shells started at once while a fabric is built (FabricNet.buildFromTopo).
SHELL_STARTS = 16
# Receive packet steering on every CPU, set as each node namespace's default before its
# ports exist. A veth hands a packet to the backlog of the CPU that sends it, and a
# switch port's queue is drained from either CPU (its timer, or the next packet's
# enqueue), so without steering two packets of one flow could be taken in on two CPUs
# and overtake each other: make test saw a RoCE queue pair's packet arrive after the
# next one, with nothing lost anywhere. Steering picks the CPU by the flow's hash, so a
# flow keeps its order. Kernels without the setting (before 6.2) go on without it.
RPS_MASK = format((1 << (os.cpu_count() or 1)) - 1, "x")


def _node_info(topo: Topo, name: str) -> dict:
    """A node's keyword arguments as Mininet's addHost or addSwitch passes them: a
    switch outside any namespace, unless its entry says otherwise."""
    info = dict(topo.nodeInfo(name))
    if info.pop("isSwitch", False):
        info.setdefault("inNamespace", False)
    return info


def _node(name: str, info: dict):
    """A node of the topology made as Mininet's addHost makes it (its shell started),
    its namespace set to steer every port's received packets by flow (`RPS_MASK`)."""
    params = dict(info)
    node = params.pop("cls")(name, **params)
    if node.inNamespace:
        node.cmd(f"sysctl -qw net.core.rps_default_mask={RPS_MASK} 2>/dev/null")
    return node


class FabricTopo(Topo):
    """The Mininet graph of a Fabric. Switch nodes use `switch_cls`; each node gets its
    entry of `switch_params` or `host_params` as keyword arguments. With a `placement`
    (topologies/placement.py), a node that runs on another server gets its class's
    remote twin (topologies/remote.py) and the server's ssh, and a link between two
    servers is a tunnel (topologies/tunnels.py)."""

    def build(self, fabric: Fabric, switch_cls: type, switch_params: NodeParams,
              host_params: NodeParams, placement: Placement | None = None):
        where = placement.where(fabric) if placement is not None else {}
        crossing = tunnels(placement, fabric) if placement is not None else {}

        def placed(name: str, cls: type, params: dict) -> dict:
            server = where.get(name)
            if server is None:
                return dict(params, cls=cls)
            remote = remote_class(cls)
            if remote is None:
                raise PlacementError(placement.source, "servers", f"{name} ({cls.__name__}) "
                                     "cannot run on another server yet",
                                     "keep BMv2 switches on the head (DATAPLANE=kernel to "
                                     "split a fabric)")
            return dict(params, cls=remote, ssh=list(server.ssh), server=server.name)

        for host in fabric.hosts:
            self.addHost(host.name, ip=None,
                         **placed(host.name, FabricHost, host_params.get(host.name, {})))
        for switch in fabric.switches:
            params = switch_params.get(switch.name, {})
            if issubclass(switch_cls, KernelRouter):
                self.addHost(switch.name, ip=None, **placed(switch.name, switch_cls, params))
            else:
                self.addSwitch(switch.name, **placed(switch.name, switch_cls, params))
        for link in fabric.links:
            a = fabric.ports(link.a)[link.a_port]
            b = fabric.ports(link.b)[link.b_port]
            tunnel = crossing.get((link.a, link.b))
            extra = {} if tunnel is None else {"cls": CrossingLink, "tunnel": tunnel}
            self.addLink(link.a, link.b, port1=a.number, port2=b.number,
                         intfName1=a.intf, intfName2=b.intf, addr1=a.mac, addr2=b.mac,
                         mtu=fabric.spec.interface_mtu, **extra)


class FabricNet(Mininet):
    """A Mininet network with a netlink socket in every node's namespace, made at start
    so that the first link fault is as quick as the others. What runs on the network
    (the eBPF switch program, PFC, the host agents, the run's topology.json) is kept by
    the running fabric that built it (experiments/run/fabric.py), not here."""

    def __init__(self, *args, **kwargs):
        self.link_state = LinkState()  # before Mininet's own set-up, which may build
        self._started: dict[str, object] = {}  # nodes whose shells started together
        super().__init__(*args, **kwargs)

    def buildFromTopo(self, topo=None) -> None:  # noqa: N802 - Mininet's
        # The nodes' shells start together: each waits some milliseconds for its shell
        # to come up, 56 of them on 2tier-8plane one after the other. Mininet then adds
        # them in the topology's order (addHost, addSwitch: BMv2's switches, whose
        # shells run in the root namespace of their machine, as Mininet's addSwitch
        # starts them).
        names = list(topo.hosts()) + list(topo.switches())
        with ThreadPoolExecutor(max_workers=SHELL_STARTS) as pool:
            made = list(pool.map(lambda name: _node(name, _node_info(topo, name)), names))
        self._started = dict(zip(names, made))
        # The links between servers, all made at once (topologies/tunnels.py make_ends).
        ends = []
        for a, b, info in topo.links(sort=True, withInfo=True):
            if info.get("cls") is CrossingLink:
                ends += link_ends(info["tunnel"],
                                  (self._started[a], info["intfName1"], info["addr1"]),
                                  (self._started[b], info["intfName2"], info["addr2"]),
                                  info["mtu"])
                info["premade"] = True
        make_ends(ends)
        super().buildFromTopo(topo)
        # Every port up, one command per node, before the nodes configure themselves.
        for node in self.hosts + self.switches:
            ports = [name for name in node.intfNames() if name != "lo"]
            if ports:
                run_commands([f"ip link set dev {p} up" for p in ports], node.cmd, node.name)

    def addHost(self, name, cls=None, **params):  # noqa: N802 - Mininet's
        return self._prestarted(name, self.hosts) or super().addHost(name, cls, **params)

    def addSwitch(self, name, cls=None, **params):  # noqa: N802 - Mininet's
        return self._prestarted(name, self.switches) or super().addSwitch(name, cls, **params)

    def _prestarted(self, name: str, nodes: list):
        """The node `name` whose shell buildFromTopo started, added to `nodes` (the
        network's hosts or switches) as Mininet adds one; None if it has none."""
        node = self._started.pop(name, None) if self._started else None
        if node is not None:
            nodes.append(node)
            self.nameToNode[name] = node
        return node

    def start(self) -> None:
        for switch in self.switches:  # switch processes start together (topologies/bmv2.py)
            if hasattr(switch, "launch"):
                switch.launch()
        super().start()
        for node in self.hosts + self.switches:
            if not is_remote(node):  # a server's node is reached through its shell
                self.link_state.open(node.pid)

    def stop(self) -> None:
        # Links with an end in the root namespace, deleted in one batch (one end takes
        # its peer with it); the others go with their namespaces (FabricLink.stop).
        ends = [end for end in (link.in_root() for link in self.links
                                if isinstance(link, FabricLink)) if end]
        if ends:
            subprocess.run(["ip", "-force", "-batch", "-"], capture_output=True,
                           input="".join(f"link del dev {end}\n" for end in ends), text=True)
        # Netlink sockets hold their namespaces alive: close them before the nodes go.
        self.link_state.close()
        super().stop()


def shape_links(net: Mininet, fabric: Fabric, features: ShapingFeatures,
                ecn: bool = True, hosts_only: bool = False) -> int:
    """Apply rate, queue, delay and ECN to both ends of every link (or to the host ends
    only, when the switches queue by themselves). Returns the tc commands run."""
    count = 0
    nodes = fabric.hosts if hosts_only else (*fabric.hosts, *fabric.switches)
    hosts = {h.name for h in fabric.hosts}
    for name in [n.name for n in nodes]:
        node = net.get(name)
        for port in fabric.ports(name):
            params = fabric.link_params(port.tier)
            if name in hosts:  # a NIC port: it holds its host's packets, it drops none
                params = nic_send_queue(params)
            # Only fabric (T0-T1) ports mark: host ports and last hops never do.
            marks = ecn and port.tier == "t0_t1"
            threshold = fabric.spec.ecn_threshold_pkts if marks else None
            count += run_commands(tc_commands(port.intf, params, threshold, features,
                                              fabric.spec.data_frame_bytes),
                                  node.cmd, name)
    return count


def set_link(net: FabricNet, a: str, b: str, up: bool) -> None:
    """Set both ends of the link between nodes a and b down or up (the link-flap primitive).

    Both ends change within microseconds, over rtnetlink (topologies/linkstate.py), as
    when a cable is cut. Coming up, each end that keeps static configuration restores
    that port's entries.
    """
    links = net.linksBetween(net.get(a), net.get(b))
    if not links:
        raise ValueError(f"no link between {a} and {b}")
    ends = [intf for link in links for intf in (link.intf1, link.intf2)]
    # An end on another server changes through its node's shell, as soon as it reads
    # the command (milliseconds, not microseconds): both ends are sent first.
    remote = [intf for intf in ends if is_remote(intf.node)]
    for intf in remote:
        intf.node.sendCmd(f"ip link set {intf.name} {'up' if up else 'down'}")
    for intf in ends:
        if not is_remote(intf.node):
            net.link_state.set(intf.node.pid, intf.name, up)
    for intf in remote:
        intf.node.waitOutput()
    if up:
        for link in links:
            for intf in (link.intf1, link.intf2):
                if isinstance(intf.node, StaticConfigNode):
                    intf.node.restore_port(intf.name)


def start_network(fabric: Fabric, switch_cls: type, switch_params: NodeParams,
                  host_params: NodeParams, placement: Placement | None = None) -> FabricNet:
    """Create and start the Mininet network (the caller must stop it). With a
    `placement`, first check that every tunnel's path carries the fabric's frames and
    remove what a dead run left on the servers (`remove_leftovers`)."""
    if placement is not None:
        check_mtu(placement, fabric)
        remove_leftovers(placement, fabric)
    topo = FabricTopo(fabric, switch_cls=switch_cls, switch_params=switch_params,
                      host_params=host_params, placement=placement)
    net = FabricNet(topo=topo, controller=None, link=FabricLink, autoSetMacs=False,
                    autoStaticArp=False, build=False)
    try:
        net.build()
        net.start()
    except BaseException:
        # A node that failed to start (e.g. a switch process that exited) leaves the
        # ones started before it running: stop them before the error goes up.
        stop_network(net)
        raise
    return net


def remove_leftovers(placement: Placement, fabric: Fabric) -> list[str]:
    """Remove what a dead run left in the own namespaces of the servers that hold nodes
    of `fabric` (topologies/remote.py remove_leftovers_on: BMv2 switch processes, and
    interfaces under the names of the fabric's ports there), the servers at once; on
    this machine the fabric lock's record does it (experiments/run/cleanup.py). What
    was removed, by name."""
    where = placement.where(fabric)
    ports: dict[str, list[str]] = {}
    servers = {}
    for node in (*fabric.hosts, *fabric.switches):
        server = where.get(node.name)
        if server is not None:
            servers[server.name] = server
            ports.setdefault(server.name, []).extend(p.intf for p in fabric.ports(node.name))
    with ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        return [name for removed in pool.map(
            lambda server: remove_leftovers_on(servers[server].ssh, ports[server]), servers)
            for name in removed]


def stop_network(net: Mininet) -> None:
    """Stop the network, also when a Ctrl-C cut a node's command short."""
    for node in net.hosts + net.switches:
        if node.shell and node.waiting:
            node.sendInt()
            node.waitOutput()
    net.stop()

