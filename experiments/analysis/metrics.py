"""Figures from a transport run (pure): completion times, goodput, path events, the
figures of each phase, and each flow's throughput over time.

Inputs are the runner's transfer records and the agents' JSON-lines event logs; the
output is a plain dict for summary.json, and time series for the plots.

Throughput comes from the agents' `progress` samples (hosts/agent.py, every 50 ms):
each receiving host's payload byte counters, in all (`rx_bytes`) and per source host
(`rx_by_src`). A flow is a (source, destination) pair. Between two samples of a host
the bytes it counted are taken to have arrived evenly, so a series does not alias
when samples and bins are not aligned. A counter that goes down belongs to an agent
that started again from zero: what it shows then is new bytes.
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from experiments.analysis.health import loop_lag

# MRC's path events, and the RoCE-like baseline's: go-back-N NAKs received ("nak") and
# sent on a gap ("gap"), queue pairs moved by routing ("reroute"), DCQCN rate cuts;
# probes that failed a retired path's way back, and connections in the error state.
PATH_EVENTS = ("retire", "reinstate", "skip", "migrate", "probe", "nack", "trim", "timeout",
               "plane-down", "plane-up", "nak", "gap", "reroute", "rate-cut", "probe-failed",
               "qp-error")


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
        delta = _new_bytes(rx, last.get(host, 0))
        last[host] = rx
        t = event["t"] - start
        if t >= 0 and delta > 0:
            bins[int(t / bin_s)] += delta
    if not bins:
        return []
    return [(i * bin_s, bins.get(i, 0) * 8 / bin_s / 1e6) for i in range(max(bins) + 1)]


# Throughput per flow: bins of BIN_S for the figures; what summary.json keeps of the
# series for a plot is capped, per flow and per transport (56 flows of all-to-all on 8
# hosts), by merging neighbouring bins.
BIN_S = 0.1
SERIES_POINTS_PER_FLOW = 100
SERIES_POINTS_PER_TRANSPORT = 2000
MIN_WINDOW_S = 0.1  # a throughput over less than two progress samples says little

Flow = tuple[int, int]  # (source host, destination host)


def _new_bytes(counter: int, before: int) -> int:
    """Bytes a counter gained since it showed `before`; one that went down was reset
    (its agent started again) and counts from zero."""
    return counter - before if counter >= before else counter


def flow_curves(events: list[dict]) -> tuple[dict[Flow, list[tuple[float, int]]],
                                             dict[int, tuple[float, float]]]:
    """Each flow's cumulative payload bytes at its destination's progress samples, and
    the span (first, last sample time) of every host that reported per-source counters.

    A flow's curve starts at the sample before its first bytes (with 0), then has a
    point at every later sample of its destination."""
    samples = sorted((e for e in events if e.get("event") == "progress"
                      and isinstance(e.get("rx_by_src"), dict)), key=lambda e: e["t"])
    last: dict[int, dict[int, int]] = {}  # destination -> source -> counter last seen
    known: dict[int, set[int]] = defaultdict(set)  # destination -> sources with a curve
    span: dict[int, tuple[float, float]] = {}
    totals: dict[Flow, int] = {}
    curves: dict[Flow, list[tuple[float, int]]] = {}
    for event in samples:
        dst, t = event.get("host", 0), event["t"]
        counters = {int(src): int(n) for src, n in event["rx_by_src"].items()}
        before = last.get(dst, {})
        for src in known[dst] | counters.keys():
            delta = _new_bytes(counters.get(src, 0), before.get(src, 0))
            flow = (src, dst)
            if flow not in curves:
                if delta <= 0:
                    continue
                curves[flow] = [(span[dst][1] if dst in span else t, 0)]
                totals[flow] = 0
                known[dst].add(src)
            totals[flow] += delta
            curves[flow].append((t, totals[flow]))
        last[dst] = counters
        span[dst] = (span[dst][0] if dst in span else t, t)
    return curves, span


def _bins(curve: list[tuple[float, int]], start: float, bin_s: float) -> list[float]:
    """Bytes per bin of `bin_s` from `start`, each step of the curve spread evenly over
    the time between its two samples (bytes before `start` are not counted)."""
    bins: dict[int, float] = defaultdict(float)
    for (t0, c0), (t1, c1) in zip(curve, curve[1:]):
        delta = c1 - c0
        if delta <= 0 or t1 < start:
            continue
        a, b = max(t0, start) - start, t1 - start
        if b <= a:  # no earlier sample to spread over: all in the sample's bin
            bins[int(b / bin_s)] += delta
            continue
        rate, i = delta / (b - a), int(a / bin_s)
        while a < b:
            edge = min(b, (i + 1) * bin_s)
            bins[i] += rate * max(0.0, edge - a)
            a, i = max(a, edge), i + 1
    return [bins.get(i, 0.0) for i in range(max(bins) + 1)] if bins else []


def flow_series(events: list[dict], start: float,
                bin_s: float = BIN_S) -> dict[Flow, list[tuple[float, float]]]:
    """Per (source, destination) flow: (time since `start`, Mbit/s) per bin of `bin_s`,
    from 0 to the flow's last bytes. Flows whose destination never reported, or that
    carried nothing, are absent."""
    curves, _ = flow_curves(events)
    series = {}
    for flow, curve in sorted(curves.items()):
        values = _bins(curve, start, bin_s)
        if values:
            series[flow] = [(i * bin_s, n * 8 / bin_s / 1e6) for i, n in enumerate(values)]
    return series


def _value_at(curve: list[tuple[float, int]], t: float) -> float:
    times = [p[0] for p in curve]
    i = bisect.bisect_right(times, t)
    if i == 0:
        return 0.0
    if i == len(curve):
        return float(curve[-1][1])
    (ta, ca), (tb, cb) = curve[i - 1], curve[i]
    return ca + (cb - ca) * (t - ta) / (tb - ta)


def flow_mbps(events: list[dict], src: int, dst: int, t0: float, t1: float,
              curves: tuple | None = None) -> float | None:
    """Mean throughput (Mbit/s) of flow `src` -> `dst` between times `t0` and `t1`
    (the events' clock, as TransferResult and TransportRun times are), or None when
    the window is empty or the destination reported nothing then. `curves` is
    `flow_curves(events)`, to reuse across calls."""
    curves_by_flow, span = curves or flow_curves(events)
    if t1 <= t0 or dst not in span or span[dst][1] < t0 or span[dst][0] > t1:
        return None
    curve = curves_by_flow.get((src, dst))
    if curve is None:
        return 0.0
    return (_value_at(curve, t1) - _value_at(curve, t0)) * 8 / (t1 - t0) / 1e6


def phase_figures(run) -> list[dict]:
    """Per phase: its index, the size of its messages (a list if they differ), its
    transfers and those delivered, the time from its start to its last delivery, and
    its goodput (delivered bytes over that time): a size sweep read size by size."""
    by_phase: dict[int, list] = defaultdict(list)
    for t in run.transfers:
        by_phase[t.phase].append(t)
    figures = []
    for index in sorted(by_phase):
        transfers = by_phase[index]
        delivered = [t for t in transfers if t.delivered is not None]
        duration = (max(t.delivered for t in delivered) - min(t.start for t in transfers)
                    if delivered else None)
        sizes = sorted({t.size for t in transfers})
        nbytes = sum(t.size for t in delivered)
        figures.append({
            "phase": index,
            "message_bytes": sizes[0] if len(sizes) == 1 else sizes,
            "transfers": len(transfers),
            "delivered": len(delivered),
            "duration_s": _round(duration),
            "goodput_mbps": (round(nbytes * 8 / duration / 1e6, 3)
                             if duration and duration > 0 else None),
        })
    return figures


def flow_throughput(run, events: list[dict], bin_s: float = BIN_S,
                    curves: tuple | None = None) -> dict:
    """Each flow of the run (from its transfers): role, bytes delivered, when it was
    active (`active_s`: from its first transfer's start to its last delivery, or the
    end of the run, in seconds since the run started), the mean and the lowest of its
    `bin_s` bins that lie wholly within that time (null when none does, or its
    destination never reported), and `series_mbps`, the bins from the run's start for
    a plot, merged in groups so that the run keeps a few thousand values at most
    (`series_bin_s`). `start_t` is the run's start on the events' clock, to measure
    other windows from events.jsonl with `flow_mbps`."""
    curves = curves or flow_curves(events)
    spans: dict[Flow, list] = {}
    for t in run.transfers:
        end = t.delivered if t.delivered is not None else run.end
        flow = spans.setdefault((t.src, t.dst), [t.start, end, 0, "data"])
        flow[0], flow[1] = min(flow[0], t.start), max(flow[1], end)
        flow[2] += t.size if t.delivered is not None else 0
        if t.role != "data":
            flow[3] = t.role
    bins = {flow: _bins(curve, run.start, bin_s) for flow, curve in curves[0].items()}
    longest = max((len(bins.get(flow, [])) for flow in spans), default=0)
    points = min(SERIES_POINTS_PER_FLOW,
                 max(10, SERIES_POINTS_PER_TRANSPORT // max(1, len(spans))))
    group = max(1, math.ceil(longest / points))
    flows = []
    for (src, dst), (first, last, nbytes, role) in sorted(spans.items()):
        values = [n * 8 / bin_s / 1e6 for n in bins.get((src, dst), [])]
        a, b = first - run.start, last - run.start
        # Bins wholly within [a, b]; the small margin absorbs float rounding.
        inside = range(math.ceil(a / bin_s - 1e-6), math.floor(b / bin_s + 1e-6))
        active = ([values[i] if i < len(values) else 0.0 for i in inside]
                  if curves[1].get(dst) else [])
        flows.append({
            "src": src, "dst": dst, "role": role, "bytes": nbytes,
            "active_s": [round(a, 3), round(b, 3)],
            "mean_mbps": round(statistics.fmean(active), 3) if active else None,
            "min_mbps": round(min(active), 3) if active else None,
            "series_mbps": [round(statistics.fmean(values[i:i + group]), 2)
                            for i in range(0, len(values), group)],
        })
    return {"start_t": run.start, "bin_s": bin_s, "series_bin_s": round(bin_s * group, 6),
            "flows": flows}


def victim_throughput(run, events: list[dict], curves: tuple | None = None) -> dict | None:
    """The incast victim's throughput while the incast ran (from the victim's start to
    the last delivery of the other transfers of its phase, or the victim's end if that
    came first) and after it (from then to the victim's end: the victim alone), or
    None when the run has no victim. A window under MIN_WINDOW_S gives null."""
    victims = [t for t in run.transfers if t.role == "victim"]
    if not victims:
        return None
    victim = victims[0]
    others = [t for t in run.transfers if t.phase == victim.phase and t.role != "victim"]
    incast_end = max((t.delivered if t.delivered is not None else run.end for t in others),
                     default=victim.start)
    victim_end = victim.delivered if victim.delivered is not None else run.end
    curves = curves or flow_curves(events)

    def mbps(t0: float, t1: float) -> float | None:
        if t1 - t0 < MIN_WINDOW_S:
            return None
        value = flow_mbps(events, victim.src, victim.dst, t0, t1, curves)
        return None if value is None else round(value, 3)

    return {
        "src": victim.src, "dst": victim.dst,
        "incast_s": round(incast_end - victim.start, 3),
        "during_incast_mbps": mbps(victim.start, min(incast_end, victim_end)),
        "after_incast_mbps": mbps(incast_end, victim_end),
    }


def summarize(run, events: list[dict]) -> dict:
    """The summary.json block of one transport run."""
    fcts = [t.fct() for t in run.transfers if t.fct() is not None]
    delivered_bytes = sum(t.size for t in run.transfers if t.delivered is not None)
    duration = max(1e-9, run.end - run.start)
    counts = Counter(e["event"] for e in events if e.get("event") in PATH_EVENTS)
    victims = [t.fct() for t in run.transfers if t.role == "victim" and t.fct() is not None]
    series = goodput_series(events, run.start)
    curves = flow_curves(events)
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
        # A RoCE queue pair past its retry limit: where a training job would abort.
        "aborted": run.aborted,
        "faults_applied": len(run.faults),
        "fault_errors": run.fault_errors,
        "path_events": dict(sorted(counts.items())),
        "agent_counters": _sum_counters(run.stats),
        "event_loop": loop_lag(run.stats),
        "phases": phase_figures(run),
        "flow_throughput": flow_throughput(run, events, curves=curves),
        "victim_throughput": victim_throughput(run, events, curves),
        "paths_in_use": paths_in_use(run.stats),
    }


def paths_in_use(stats: dict[int, dict]) -> dict | None:
    """The distinct paths each connection sprayed over at the end of the run, from the
    agents' `stats` (hosts/agent.py `paths_in_use`, per peer): the fewest, the median
    and per connection (`src`, `dst`, `paths`); None when no agent reported any."""
    connections = sorted((int(host), int(peer), int(n)) for host, s in stats.items()
                         for peer, n in (s.get("paths_in_use") or {}).items())
    if not connections:
        return None
    counts = [n for _, _, n in connections]
    return {"min": min(counts), "median": statistics.median(counts),
            "connections": [{"src": src, "dst": dst, "paths": n}
                            for src, dst, n in connections]}


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
                          path_of, since: float | None = None) -> dict | None:
    """How one connection came through the failure of one path, from per-packet events.

    Needs the sender's `send` and `ack` events (protocol setting `packet_events`), which
    both transports log with the EV of the transmission. `failed` names the failed path
    as `path_of(ev)` does (e.g. (plane, spine)). A transmission on it was lost when its
    packet was in the end acknowledged on another path. With `since` (when the fault
    began), only transmissions from then on: before it, a packet acknowledged on
    another path was sent again there (a tail probe's resend answered first), not lost
    to the fault.

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
            if s["psn"] in acks and path_of(acks[s["psn"]]["ev"]) != failed
            and (since is None or s["t"] >= since)]
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
