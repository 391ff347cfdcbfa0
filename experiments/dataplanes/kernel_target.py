"""The kernel target: Linux SRv6 routers, one network namespace per switch.

Each switch is a `KernelRouter` (topologies/nodes.py) whose static tables are `ip -6`
routes built by controller/kernel.py from the tables of controller/tables.py. Links are
shaped with tc at both ends, since the kernel has no switch queues of its own; faults
are `ip` and netlink changes in the switches' namespaces, and a link's rate (`set_rate`)
the htb class of each end (topologies/shaping.py `rate_commands`) with, on a switch
port that runs the eBPF switch program, the rate its virtual queues drain at.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from controller import ebpf_config
from controller.kernel import (
    blackhole_commands,
    by_interface,
    router_setup_commands,
    switch_commands,
)
from controller.tables import switch_tables
from topologies.model import Fabric, Port
from topologies.network import set_link
from topologies.nodes import KernelRouter
from topologies.shaping import rate_commands

if TYPE_CHECKING:
    from experiments.dataplanes.ebpf_switch import Counters, Running
    from topologies.network import FabricNet, NodeParams


class KernelTarget:
    name = "kernel"
    switch_cls = KernelRouter
    shape_switch_ports = True  # tc shapes every link; the kernel has no switch queues of its own
    pfc = ("decided hop by hop in the eBPF program and carried out: a paused NIC port's "
           "queue pairs stop sending, a paused switch port's lossless queue is held (its tbf "
           "leaf shut until the resume; at most one frame leaves after the pause; on a split "
           "fabric, this machine's switches only; docs/protocol.md)")

    def fabric_for(self, fabric: Fabric, calibrated: tuple[float, str] | None = None) -> Fabric:
        return fabric  # the kernel forwards at the topology's rates; the agents' cap is apart

    def data_scale(self) -> float:
        return 1.0

    def switch_params(self, fabric: Fabric) -> NodeParams:
        return {s.name: {"setup_commands": router_setup_commands()} for s in fabric.switches}

    @staticmethod
    def _tables(fabric: Fabric, switch: str) -> tuple[list[str], dict[str, list[str]]]:
        """The switch's table commands, and those of each port (restored after a flap)."""
        commands = switch_commands(switch_tables(fabric, fabric.node(switch)))
        return commands, by_interface(commands, [p.intf for p in fabric.ports(switch)])

    def program(self, net: FabricNet, fabric: Fabric) -> int:
        return sum(net.get(s.name).install(*self._tables(fabric, s.name))
                   for s in fabric.switches)

    def reboot(self, net: FabricNet, fabric: Fabric, switch: str, up: bool) -> int:
        node = net.get(switch)
        if not up:
            node.power_off()
            return 0
        return node.power_on(*self._tables(fabric, switch))

    def blackhole(self, net: FabricNet, fabric: Fabric, switch: str, on: bool) -> None:
        net.get(switch).run(blackhole_commands(switch_tables(fabric, fabric.node(switch)), on))

    def set_link(self, net: FabricNet, a: str, b: str, up: bool) -> None:
        set_link(net, a, b, up)

    def set_rate(self, running: Running, a: str, b: str, share: float) -> None:
        """Run the link between a and b at `share` of its rate, both ways (1: its rate
        again): the htb link class of each end and, where the eBPF switch program runs
        a switch port (every switch port, when it runs at all), that port's settings at
        the new rate, so that its virtual queues drain, mark and pause as the port
        does. A host port runs the program in faults-only mode, which has no queue."""
        net, fabric, ebpf = running.net, running.fabric, running.ebpf_ports
        writes = []
        for port in link_ends(fabric, a, b):
            params = fabric.link_params(port.tier)
            params = dataclasses.replace(params, rate_mbit=params.rate_mbit * share)
            net.get(port.node).run(rate_commands(port.intf, params.rate_mbit,
                                                 fabric.spec.data_frame_bytes))
            ifindex = ebpf.ports.get((port.node, port.intf))
            if ifindex is not None and fabric.node(port.node).role != "host":
                tables = switch_tables(fabric, fabric.node(port.node))
                (role,) = [r for r in tables.ports if r.port == port.number]
                peer = fabric.ports(port.peer)[port.peer_port].intf
                writes.append(ebpf_config.port_config(
                    tables, role, params, ebpf.ports.get((port.peer, peer), 0))
                    .write(ifindex))
        if writes:
            ebpf.write(writes)

    def summary_fields(self) -> dict[str, object]:
        return {}

    def switch_counters(self, running: Running, switches: list[str] | None = None) -> Counters:
        """The eBPF switch program's counters, where it runs."""
        from experiments.dataplanes import ebpf_switch

        found = ebpf_switch.read_counters(running) if running.ebpf_ports.ports else {}
        return found if switches is None else {n: found[n] for n in switches if n in found}


def link_ends(fabric: Fabric, a: str, b: str) -> list[Port]:
    """The two ends of the link between nodes a and b: a's port, then b's."""
    return ([p for p in fabric.ports(a) if p.peer == b]
            + [p for p in fabric.ports(b) if p.peer == a])
