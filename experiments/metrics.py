"""Figures from a transport run (pure): completion times, goodput, path events.

Inputs are the runner's transfer records and the agents' JSON-lines event logs; the
output is a plain dict for summary.json, and time series for the plots.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

# MRC's path events, and the RoCE-like baseline's: go-back-N NAKs received ("nak") and
# sent on a gap ("gap"), queue pairs moved by routing ("reroute"), DCQCN rate cuts.
PATH_EVENTS = ("retire", "reinstate", "skip", "probe", "nack", "trim", "timeout",
               "plane-down", "plane-up", "nak", "gap", "reroute", "rate-cut")


def read_events(files: list[Path]) -> list[dict]:
    events = []
    for path in files:
        if not path.exists():
            continue
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue  # a line cut short by a killed agent
    events.sort(key=lambda e: e.get("t", 0.0))
    return events


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def goodput_series(events: list[dict], start: float,
                   bin_s: float = 0.1) -> list[tuple[float, float]]:
    """(time since start, Mbit/s) of newly received payload bytes over all hosts."""
    last: dict[int, int] = {}
    bins: Counter = Counter()
    for event in events:
        if event.get("event") != "progress" or "rx_bytes" not in event:
            continue
        host, rx = event.get("host", 0), int(event["rx_bytes"])
        delta = rx - last.get(host, 0)
        last[host] = rx
        t = event["t"] - start
        if t >= 0 and delta > 0:
            bins[int(t / bin_s)] += delta
    if not bins:
        return []
    return [(i * bin_s, bins.get(i, 0) * 8 / bin_s / 1e6) for i in range(max(bins) + 1)]


def summarize(run, events: list[dict]) -> dict:
    """The summary.json block of one transport run."""
    fcts = [t.fct() for t in run.transfers if t.fct() is not None]
    delivered_bytes = sum(t.size for t in run.transfers if t.delivered is not None)
    duration = max(1e-9, run.end - run.start)
    counts = Counter(e["event"] for e in events if e.get("event") in PATH_EVENTS)
    victims = [t.fct() for t in run.transfers if t.role == "victim" and t.fct() is not None]
    series = goodput_series(events, run.start)
    return {
        "transport": run.transport,
        "ok": run.ok,
        "transfers": len(run.transfers),
        "transfers_done": sum(t.done for t in run.transfers),
        "transfers_failed": sum(not t.done for t in run.transfers),
        "verified": all(t.verified for t in run.transfers if t.delivered is not None),
        "bytes_delivered": delivered_bytes,
        "workload_s": round(duration, 3),
        "goodput_mbps": round(delivered_bytes * 8 / duration / 1e6, 3),
        "peak_goodput_mbps": round(max((g for _, g in series), default=0.0), 3),
        "fct_p50_s": _round(percentile(fcts, 50)),
        "fct_p99_s": _round(percentile(fcts, 99)),
        "fct_max_s": _round(max(fcts) if fcts else None),
        "victim_fct_s": _round(victims[0] if victims else None),
        "timed_out": run.timed_out,
        "faults_applied": len(run.faults),
        "fault_errors": run.fault_errors,
        "path_events": dict(sorted(counts.items())),
        "agent_counters": _sum_counters(run.stats),
    }


def workload_ok(blocks: list[dict]) -> bool:
    """Whether a workload run succeeded, from its per-transport blocks (`summarize`).

    Every MRC transfer delivered, verified and acknowledged; no transport delivered a
    corrupt byte; and every fault step applied: a fault that failed to happen would
    flatter every transport, so such a run proves nothing.
    """
    mrc = [b for b in blocks if b["transport"].startswith("mrc")]
    return (bool(blocks) and all(b["ok"] for b in mrc)
            and all(b["verified"] and not b["fault_errors"] for b in blocks))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _sum_counters(stats: dict[int, dict]) -> dict:
    total: Counter = Counter()
    for counters in stats.values():
        for key, value in counters.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "t":
                total[key] += value
    return dict(sorted(total.items()))


def path_failure_recovery(events: list[dict], sender: int, peer: int, failed,
                          path_of) -> dict | None:
    """How one connection came through the failure of one path, from per-packet events.

    Needs the sender's `send` and `ack` events (protocol setting `packet_events`), which
    both transports log with the EV of the transmission. `failed` names the failed path
    as `path_of(ev)` does (e.g. (plane, spine)). A transmission on it was lost when its
    packet was in the end acknowledged on another path.

    - failure: the send time of the first lost transmission. The link went down between
      the last transmission that got through and this one (`uncertainty_ms`); times are
      measured from it, so they are not flattered by the fault's own timing;
    - detection: the first retirement (mrc) or reroute (single-path) after it;
    - repaired: when the last lost packet was acknowledged: from then on every packet
      sent before the failure was noticed has arrived, and the flow runs on live paths;
    - RTT: median and minimum of the connection's acknowledged first transmissions in
      the 300 ms before the failure, so results can be read in round trips.

    Returns None if the failure hit no packet of the connection.
    """
    sends, acks = [], {}
    for e in events:
        if e.get("host") != sender or e.get("peer") != peer:
            continue
        if e["event"] == "send":
            sends.append(e)
        elif e["event"] == "ack" and e.get("ev") is not None:
            acks[e["psn"]] = e
    on_path = [s for s in sends if path_of(s["ev"]) == failed]
    lost = [s for s in on_path
            if s["psn"] in acks and path_of(acks[s["psn"]]["ev"]) != failed]
    if not lost:
        return None
    t_fail = min(s["t"] for s in lost)
    lost_psns = {s["psn"] for s in lost}
    through = [s["t"] for s in on_path if s["t"] < t_fail and s["psn"] not in lost_psns]
    reacted = [e["t"] for e in events if e.get("host") == sender and e.get("peer") == peer
               and e["event"] in ("retire", "reroute") and e["t"] >= t_fail]
    repaired = max(acks[psn]["t"] for psn in lost_psns)
    rtts = [acks[s["psn"]]["t"] - s["t"] for s in sends
            if t_fail - 0.3 <= s["t"] < t_fail and not s.get("retransmit")
            and s["psn"] in acks and acks[s["psn"]]["ev"] == s["ev"]
            and acks[s["psn"]]["t"] < t_fail]
    rtt = statistics.median(rtts) if rtts else None
    repaired_s = repaired - t_fail
    return {
        "failed_at": t_fail,
        "lost_packets": len(lost_psns),
        "uncertainty_ms": round((t_fail - max(through)) * 1000, 2) if through else None,
        "detect_ms": round((reacted[0] - t_fail) * 1000, 2) if reacted else None,
        "repaired_ms": round(repaired_s * 1000, 2),
        "rtt_median_ms": round(rtt * 1000, 3) if rtt else None,
        "rtt_min_ms": round(min(rtts) * 1000, 3) if rtts else None,
        "repaired_rtts": round(repaired_s / rtt, 1) if rtt else None,
    }
