"""report.md: the transports of one run side by side, in words and numbers."""

from __future__ import annotations

from pathlib import Path

from experiments.analysis import similarity
from experiments.analysis.slowdown import describe


def _fabric(block: dict) -> str:
    fabric = block.get("fabric")
    if not fabric:
        return "-"
    return f"{fabric['topology']} ({fabric['planes']} x {fabric['rate_mbit']:g} Mbit/s)"


def _aborted(block: dict) -> str:
    a = block.get("aborted")
    if not a:
        return "no"
    return (f"**yes, at {a['t']:.2f} s**: QP {a['qp']} of h{a['src']} -> h{a['dst']} past its "
            "retry limit (the job would abort here)")


ROWS = [
    ("fabric", _fabric),
    ("completed and verified", lambda s: f"{s['transfers_done']}/{s['transfers']}"),
    ("workload time (s)", lambda s: s["workload_s"]),
    ("goodput (Mbit/s)", lambda s: s["goodput_mbps"]),
    ("peak goodput (Mbit/s)", lambda s: s["peak_goodput_mbps"]),
    ("completion time p50 (s)", lambda s: s["fct_p50_s"]),
    ("completion time p99 (s)", lambda s: s["fct_p99_s"]),
    ("victim flow completion (s)", lambda s: s["victim_fct_s"]),
    ("timed out", lambda s: s["timed_out"]),
    ("queue pair in error (job aborted)", _aborted),
    ("paths retired / reinstated", lambda s: f"{s['path_events'].get('retire', 0)} / "
                                             f"{s['path_events'].get('reinstate', 0)}"),
    ("EVs migrated by ECN", lambda s: s["path_events"].get("migrate", 0)),
    ("NACKs (trimmed packets)", lambda s: s["path_events"].get("nack", 0)),
    ("retransmit timeouts", lambda s: s["path_events"].get("timeout", 0)),
    ("go-back-N NAKs (baseline)", lambda s: s["path_events"].get("nak", 0)),
    ("queue pairs rerouted / rate cuts (baseline)",
     lambda s: f"{s['path_events'].get('reroute', 0)} / {s['path_events'].get('rate-cut', 0)}"),
]
# Rows from the switch ports' counters (experiments/dataplanes/switch_counters.py), host-facing
# ports / fabric ports, each where the data plane counts it. Trimming under SONiC's
# names (TRIM_PKTS: trimmed; TX_TRIM_PKTS: trimmed and sent; DROPPED_TRIM_PKTS: trimmed,
# then dropped, the priority queue full).
SWITCH_COUNTERS = (("trim_pkts", "TRIM_PKTS"), ("tx_trim_pkts", "TX_TRIM_PKTS"),
                   ("dropped_trim_pkts", "DROPPED_TRIM_PKTS"), ("ecn_marked", "ECN marked"),
                   ("dropped", "dropped (queue full)"), ("fault_dropped", "fault dropped"),
                   ("pfc_xoff_tx", "PFC pauses sent"), ("pfc_paused_us", "PFC paused (µs)"))


def switch_rows(transports: list[dict]) -> list:
    """The rows of the switch counters every transport's block has."""
    counted = [t["switch_counters"]["host_ports"] for t in transports]
    return [(f"switch ports: {label} (host / fabric)",
             lambda s, name=name: f"{s['switch_counters']['host_ports'][name]} / "
                                  f"{s['switch_counters']['fabric_ports'][name]}")
            for name, label in SWITCH_COUNTERS if all(name in c for c in counted)]


# Host ports that got the program for a fault (a gray loss acts there).
HOST_NIC_ROW = ("host ports: fault dropped",
                lambda s: s["switch_counters"]["host_nics"]["fault_dropped"])


def _trust(summary: dict) -> list[str]:
    """report.md's first lines: whether the result can be read as the network's, and
    why not (the run's proportions against the paper's regime: experiments/analysis/similarity.py;
    the machine keeping up: experiments/analysis/health.py)."""
    lines = []
    if "emulation" in summary:
        lines.append(summary["emulation"]["headline"])
    if "similarity" in summary:
        lines.append(similarity.headline(summary["similarity"]))
    return [" ".join(lines), ""] if lines else []


def write_report(path: Path, summary: dict) -> None:
    transports = summary.get("transports", [])
    lines = [
        f"# {summary['scenario']} on {summary['topology']} ({summary['dataplane']})",
        "",
        *_trust(summary),
        summary.get("scenario_description", ""),
        "",
        f"{summary['hosts']} hosts, {summary['switches']} switches, {summary['planes']} planes; "
        f"network up in {summary.get('bringup_s', '?')} s with {summary.get('table_writes', '?')} "
        "table writes.",
        "",
    ]
    if summary.get("servers"):
        lines += ["Split across servers: " + "; ".join(
            f"{name} ({'namespace server' if s['namespace'] else s['address']}): "
            + ", ".join(part for part in (
                f"planes {', '.join(map(str, s['planes']))}" if s["planes"] else "",
                f"hosts {s['hosts'] if s['hosts'] == 'all' else ', '.join(s['hosts'])}"
                if s["hosts"] else "") if part)
            for name, s in summary["servers"].items()) + "; the rest on this machine.", ""]
    if "bmv2_link_rate_mbit" in summary:
        lines += [f"Links at {summary['bmv2_link_rate_mbit']:g} Mbit/s on BMv2: "
                  f"{summary['bmv2_link_rate_reason']}.", ""]
    fit = summary.get("workload", {}).get("fit")
    if fit:  # how the scenario was fit to slower links (experiments/run/timescale.py)
        lines += [f"{fit[0].upper()}{fit[1:]}.", ""]
    faults = summary.get("faults", [])
    if faults:
        lines += ["## Faults", ""]
        for f in faults:
            target = " ".join(map(str, f["target"]))
            lines.append(f"- t={f['t']:.2f}s {f['fault']} {target} {'up' if f['up'] else 'down'}")
        lines.append("")
    errors = [(t["transport"], e) for t in transports for e in t.get("fault_errors", [])]
    if errors:
        lines += ["## Faults that failed to apply", "",
                  "The run is not ok: the network did not see the scenario's faults.", ""]
        lines += [f"- {transport}: {error}" for transport, error in errors]
        lines.append("")
    if transports:
        lines += ["## Results", "", "| | " + " | ".join(t["transport"] for t in transports) + " |",
                  "|---|" + "---|" * len(transports)]
        rows = ROWS + (switch_rows(transports)
                       if all("switch_counters" in t for t in transports) else [])
        if all("fault_dropped" in t.get("switch_counters", {}).get("host_nics", {})
               for t in transports):
            rows = rows + [HOST_NIC_ROW]
        for label, get in rows:
            lines.append(f"| {label} | " + " | ".join(str(get(t)) for t in transports) + " |")
        lines += ["", "![goodput](goodput.png)", "", "![completion times](fct_cdf.png)", "",
                  "![paths out of service](path_states.png)", "",
                  "![throughput per flow](flows.png)", ""]
    if "similarity" in summary:
        block = summary["similarity"]
        lines += ["## Proportions", "",
                  f"Base round trip {block['base_rtt_ms']:g} ms; each number against the "
                  "regime of the paper's fabrics (docs/similarity.md).", "",
                  *similarity.table(block), ""]
        if block.get("note"):
            lines += [block["note"] + ".", ""]
    if summary.get("slowdown"):
        lines += ["## Against each transport's own fault-free run", "",
                  "The same workload on the same network without the faults, played right "
                  "after: what the faults cost each transport.", ""]
        lines += [f"- {entry['transport']}: {describe(entry)}" for entry in summary["slowdown"]]
        lines.append("")
    for note in summary.get("link_emulation", {}).get("notes", []):
        lines.append(f"Note: {note}.")
    path.write_text("\n".join(lines) + "\n")
