"""A switch of the running fabric looked at, as its data plane holds it: `tables` (on
BMv2 the P4 table entries read over P4Runtime; on the kernel the static tables, then
the routes and neighbours in the switch's namespace) and `counters` (what the P4
program or the eBPF switch program counted per port, or else Linux's own counters).
Nothing here changes a switch.
"""

from __future__ import annotations

import json

from controller.tables import switch_tables
from experiments.interactive.reports import counter_lines, kernel_counter_lines
from topologies.model import Fabric


def tables(net, fabric: Fabric, target, switch: str) -> list[str]:
    if target.name == "bmv2":
        return _p4_tables(switch)
    static = switch_tables(fabric, fabric.node(switch))
    lines = [f"{switch}: static tables (controller/tables.py): my uSID "
             f"{static.my_usid:#06x}, {len(static.routes)} routes, "
             f"{len(static.ports)} ports; installed in the kernel:"]
    node = net.get(switch)
    for command in ("ip -6 route show", "ip -6 neigh show"):
        lines.append(f"  $ {command}")
        lines += ["    " + line for line in node.cmd(command).strip().splitlines()]
    return lines


def _p4_tables(switch: str) -> list[str]:
    # gRPC and the P4Runtime protobufs load only when a BMv2 switch is read.
    from controller.bmv2_entries import MY_USID, NEXT_HOP, PORT_CONFIG
    from experiments.interactive.p4shell import connect, disconnect, find_switch

    shell = connect(find_switch(switch, "tables"))
    try:
        lines = []
        for table in (MY_USID, NEXT_HOP, PORT_CONFIG):
            entries = list(shell.TableEntry(table).read())
            lines.append(f"{switch}: {table}: {len(entries)} entries")
            for entry in entries:
                lines += ["    " + line for line in str(entry).strip().splitlines()]
        return lines
    finally:
        disconnect()


def counters(running, switch: str, trim_only: bool = False) -> list[str]:
    """A switch's per-port counters as the data plane of the running fabric
    (experiments/run/fabric.py RunningFabric) counts them (the eBPF switch program, the
    P4 program), in SONiC's columns; `trim_only`: its `show interfaces counters trim`.
    On a kernel fabric without the eBPF program, the kernel's own interface counters."""
    net, fabric = running.net, running.fabric
    found = running.target.switch_counters(running, [switch]).get(switch)
    if found:
        return counter_lines(fabric, switch, found, trim_only)
    listed = json.loads(net.get(switch).cmd("ip -s -j link show") or "[]")
    return kernel_counter_lines(fabric, switch,
                                {entry["ifname"]: entry.get("stats64", {}) for entry in listed})
