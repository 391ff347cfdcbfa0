"""The kernel target: Linux SRv6 routers, one network namespace per switch.

Each switch is a `KernelRouter` (topologies/nodes.py) whose static tables are `ip -6`
routes built by controller/kernel.py from the tables of controller/tables.py. Links are
shaped with tc at both ends, since the kernel has no switch queues of its own; faults
are `ip` and netlink changes in the switches' namespaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.kernel import (
    blackhole_commands,
    by_interface,
    router_setup_commands,
    switch_commands,
)
from controller.tables import switch_tables
from topologies.model import Fabric
from topologies.network import set_link
from topologies.nodes import KernelRouter

if TYPE_CHECKING:
    from experiments.dataplanes.ebpf_switch import Counters
    from topologies.network import FabricNet, NodeParams


class KernelTarget:
    name = "kernel"
    switch_cls = KernelRouter
    shape_switch_ports = True  # tc shapes every link; the kernel has no switch queues of its own

    def fabric_for(self, fabric: Fabric) -> Fabric:
        return fabric  # the kernel forwards at the topology's rates

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

    def summary_fields(self) -> dict[str, object]:
        return {}

    def switch_counters(self, net: FabricNet, fabric: Fabric,
                        switches: list[str] | None = None) -> Counters:
        """The eBPF switch program's counters, where it runs."""
        from experiments.dataplanes import ebpf_switch

        found = ebpf_switch.read_counters(net) if net.ebpf_ports else {}
        return found if switches is None else {n: found[n] for n in switches if n in found}
