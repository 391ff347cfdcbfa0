"""Data-plane targets: which node class the switches use and how their tables get written.

A target turns the static tables (controller/tables.py) into a running data plane:
- `KernelTarget`: switches are Linux router namespaces; tables become `ip -6` routes.
Each target's `program()` writes every table once and returns the number of writes, so
the run summary can show that nothing is written again while traffic runs.
"""

from __future__ import annotations

from controller.tables import all_tables
from topologies.model import Fabric
from topologies.nodes import KernelRouter


class KernelTarget:
    name = "kernel"
    switch_cls = KernelRouter
    shape_switch_ports = True  # tc shapes every link; the kernel has no switch queues of its own

    def switch_params(self, fabric: Fabric) -> dict:
        return {}

    def program(self, net, fabric: Fabric) -> int:
        return sum(net.get(name).program(tables) for name, tables in all_tables(fabric).items())


def make_target(name: str):
    if name == "kernel":
        return KernelTarget()
    # The BMv2 target lives beside the P4 controller; imported only when asked for.
    from experiments.bmv2_target import Bmv2Target

    return Bmv2Target()
