"""What the CLI prints, made from what it found (pure): a send's report, a host's paths
with the faults that cut them and the sender's EV states on them, a switch's counters
in SONiC's columns.
"""

from __future__ import annotations

from experiments.faults import Fault
from experiments.interactive.parse import SendRequest
from hosts.protocol import ev_choice
from topologies.model import Fabric
from topologies.paths import catalogue, path_nodes

# Sender counters worth a word after a send (hosts/sender.py, hosts/baseline.py).
SEND_COUNTERS = (("data_tx", "packets sent"), ("retransmits", "retransmitted"),
                 ("retired", "EVs retired"), ("reinstated", "EVs reinstated"),
                 ("probes", "probes"), ("timeouts", "timeouts"), ("nacks", "NACKs"),
                 ("ecn_echoes", "ECN echoes"), ("reroutes", "reroutes"))
# The columns of `counters`, as SONiC's `show interfaces counters` and `... trim` name
# them (each shown where the data plane counts it).
# `unroutable` (the P4 program's) counts by the port a packet came in on, the others
# by the port it left on or was dropped at.
COUNTER_COLUMNS = ("forwarded", "dropped", "unroutable", "ecn_marked", "trim_pkts",
                   "tx_trim_pkts", "dropped_trim_pkts", "pfc_xoff_tx", "pfc_xoff_rx",
                   "fault_dropped")
COUNTER_COLUMNS_TRIM = ("trim_pkts", "tx_trim_pkts", "dropped_trim_pkts")


def send_report(req: SendRequest, fabric: Fabric, took: float | None, acked: float | None,
                verified: bool | None, before: dict, after: dict) -> list[str]:
    """What happened to one message, in two lines."""
    head = (f"{fabric.host(req.src).name} -> {fabric.host(req.dst).name} over "
            f"{req.transport}: {req.size} bytes")
    if took is None:
        lines = [f"{head} NOT delivered"]
    else:
        rate = req.size * 8 / took / 1e6 if took > 0 else 0.0
        check = "verified" if verified else "CORRUPTED (verification failed)"
        lines = [f"{head} delivered in {took:.3f} s ({rate:.1f} Mbit/s), {check}"
                 + (f", all acknowledged after {acked:.3f} s" if acked is not None
                    else ", NOT all acknowledged")]
    counts = [f"{label} {after[key] - before.get(key, 0)}" for key, label in SEND_COUNTERS
              if key in after]
    if counts:
        lines.append(f"  sender {fabric.host(req.src).name}: {', '.join(counts)}")
    errors = after.get("qp_errors", 0) - before.get("qp_errors", 0)
    if errors:
        lines.append(f"  {errors} queue pair(s) went to the error state (a packet timed out "
                     "past the retry count): a training job would abort here")
    return lines


def path_faults(nodes: list[str], plane: int, faults: dict[tuple, Fault]) -> list[str]:
    """The faults set in this session that cut a path of `plane` through `nodes`."""
    return [cut for fault in faults.values() if (cut := fault.cuts(nodes, plane))]


def ev_summary(evs: list[dict]) -> str:
    """`3 GOOD, 1 SKIP; out of rotation: 4 ASSUMED_BAD`: the EVs of one path by state,
    those the sender sprays over, then those it keeps aside (retired ones, spares)."""
    def by_state(states: list[str]) -> str:
        return ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))

    active = [e["state"] for e in evs if e.get("active", True)]
    aside = [e["state"] for e in evs if not e.get("active", True)]
    return (by_state(active) or "none in use") + (
        f"; out of rotation: {by_state(aside)}" if aside else "")


def path_lines(fabric: Fabric, src: int, dst: int, faults: dict[tuple, Fault],
               evs: list[dict] | None, note: str) -> list[str]:
    """`paths`: src's paths to dst, each with the switches on it, its address, the
    faults that cut it and the states of the sender's EVs on it (`evs`, None when
    there are none to show: `note` says why)."""
    name = fabric.host(src).name
    route = catalogue(fabric, src, dst)
    lines = [f"{name} -> {fabric.host(dst).name}: {len(route)} paths; {note}"]
    for path in route:
        nodes = path_nodes(fabric, path.usids, name)
        cut = path_faults(nodes, path.plane, faults)
        lines.append(f"  plane {path.plane}  {' > '.join(nodes):40} {path.address}")
        text = f"      network: {'; '.join(cut) if cut else 'no fault set'}"
        if evs is not None:
            choice = ev_choice(path.ev)
            text += "   EVs: " + ev_summary(
                [e for e in evs if e["plane"] == path.plane and e["path"] == choice])
        lines.append(text)
    return lines


def counter_lines(fabric: Fabric, switch: str, found: dict[str, dict[str, int]],
                  trim_only: bool = False) -> list[str]:
    """A switch's per-port counters (interface -> counter -> packets) in columns as
    SONiC's `show interfaces counters` shows them, `trim_only`: its `... trim`; only
    the columns the data plane counts."""
    names = [n for n in (COUNTER_COLUMNS_TRIM if trim_only else COUNTER_COLUMNS)
             if any(n in c for c in found.values())]
    title = "show interfaces counters" + (" trim" if trim_only else "")
    heads = [name.upper() for name in names]
    widths = [max(len(h), 7) for h in heads]
    lines = [f"{switch}: {title}",
             f"  {'IFACE':14} {'PEER':8} " + " ".join(f"{h:>{w}}" for h, w in
                                                     zip(heads, widths))]
    for port in fabric.ports(switch):
        values = found.get(port.intf, {})
        lines.append(f"  {port.intf:14} {port.peer:8} " + " ".join(
            f"{values.get(n, 0):>{w}}" for n, w in zip(names, widths)))
    return lines


def kernel_counter_lines(fabric: Fabric, switch: str, stats: dict[str, dict]) -> list[str]:
    """A kernel switch's ports as Linux counts them (`ip -s -j link`'s `stats64` per
    interface), where no eBPF switch program counts more."""
    lines = [f"{switch}: kernel interface counters (packets; no eBPF switch program "
             "here, so no trimming, marking or PFC counts)",
             f"  {'port':18} {'peer':8} {'rx':>9} {'tx':>9} {'rx drop':>8} {'tx drop':>8}"]
    for port in fabric.ports(switch):
        s = stats.get(port.intf, {})
        rx, tx = s.get("rx", {}), s.get("tx", {})
        lines.append(f"  {port.intf:18} {port.peer:8} {rx.get('packets', 0):>9} "
                     f"{tx.get('packets', 0):>9} {rx.get('dropped', 0):>8} "
                     f"{tx.get('dropped', 0):>8}")
    return lines
