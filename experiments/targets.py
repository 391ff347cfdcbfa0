"""Data-plane targets: which node class the switches use and how their tables get written.

A target turns the static tables (controller/tables.py) into a running data plane:
- `KernelTarget`: switches are Linux router namespaces; tables become `ip -6` routes.
Each target's `program()` writes every table once and returns the number of writes, so
the run summary can show that nothing is written again while traffic runs.
"""

from __future__ import annotations

from controller.tables import all_tables, switch_tables
from experiments.faults import Action
from topologies.addressing import intf_name
from topologies.model import Fabric
from topologies.network import set_link
from topologies.nodes import KernelRouter


class KernelTarget:
    name = "kernel"
    switch_cls = KernelRouter
    shape_switch_ports = True  # tc shapes every link; the kernel has no switch queues of its own

    def switch_params(self, fabric: Fabric) -> dict:
        return {}

    def program(self, net, fabric: Fabric) -> int:
        return sum(net.get(name).program(tables) for name, tables in all_tables(fabric).items())

    def reboot(self, net, fabric: Fabric, switch: str, up: bool) -> int:
        node = net.get(switch)
        if not up:
            node.power_off()
            return 0
        return node.power_on(switch_tables(fabric, fabric.node(switch)))

    def blackhole(self, net, switch: str, on: bool) -> None:
        net.get(switch).blackhole(on)

    def set_link(self, net, a: str, b: str, up: bool) -> None:
        set_link(net, a, b, up)


def apply_fault(net, fabric: Fabric, action: Action, target) -> None:
    """Apply one fault step on any target; link and switch faults go to the target."""
    if action.kind == "link-flap":
        target.set_link(net, *action.target, up=action.up)
    elif action.kind == "nic-port-down":
        host, plane = action.target
        net.get(host).set_port(intf_name(host, plane), action.up)
    elif action.kind == "switch-reboot":
        target.reboot(net, fabric, action.target[0], action.up)
    else:
        target.blackhole(net, action.target[0], not action.up)


def make_target(name: str):
    if name == "kernel":
        return KernelTarget()
    # The BMv2 target lives beside the P4 controller; imported only when asked for.
    from experiments.bmv2_target import Bmv2Target

    return Bmv2Target()
