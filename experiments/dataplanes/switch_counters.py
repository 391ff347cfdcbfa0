"""What the switch ports counted during a run, from whichever data plane counts.

Each target reads its ports' counters (experiments/dataplanes/targets.py `switch_counters`: the
eBPF switch program's maps on the kernel, the P4 program's counters over P4Runtime on
BMv2) as node -> interface -> counter -> packets, under the names of
controller/ebpf_config.py COUNTERS. This module turns two readings into what a run
reports: the difference, summed over groups of ports that tell different stories.
"""

from __future__ import annotations

from topologies.model import Fabric

Counters = dict[str, dict[str, dict[str, int]]]  # node -> interface -> counter -> packets
# Switch ports facing a host (the last hops), the switch ports between switches, and
# the hosts' own ports (where a gray loss acts and PFC pauses a NIC).
GROUPS = ("host_ports", "fabric_ports", "host_nics")


def counter_totals(fabric: Fabric, before: Counters, after: Counters) -> dict[str, dict]:
    """What the ports counted between two readings, summed over the switch ports that
    face a host (the last hops: `host_ports`), over the switch ports of the fabric
    (T0-T1: `fabric_ports`), so that a run can show, say, that ECN marks appear on
    fabric ports and never on host ports, and over the hosts' own ports (`host_nics`,
    where a gray loss acts and PFC pauses a NIC; only where a host port counts)."""
    switches = {s.name for s in fabric.switches}
    tiers = {(n, p.intf): p.tier for n in switches for p in fabric.ports(n)}
    names = sorted({name for ports in after.values() for counters in ports.values()
                    for name in counters})
    groups = GROUPS if any(node not in switches for node in after) else GROUPS[:2]
    totals = {group: dict.fromkeys(names, 0) for group in groups}
    for node, ports in after.items():
        for intf, counters in ports.items():
            if node not in switches:
                group = "host_nics"
            else:
                group = "host_ports" if tiers[(node, intf)] == "host_t0" else "fabric_ports"
            old = before.get(node, {}).get(intf, {})
            for name, value in counters.items():
                totals[group][name] += value - old.get(name, 0)
    return totals


def total(totals: dict[str, dict[str, int]]) -> dict[str, int]:
    """The groups of `counter_totals` added up."""
    names = {name for group in totals.values() for name in group}
    return {name: sum(group.get(name, 0) for group in totals.values()) for name in sorted(names)}
