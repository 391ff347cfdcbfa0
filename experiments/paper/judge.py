"""Verdicts of the paper's rows (pure): measured figures in, PASS, FAIL or INCONCLUSIVE
and the figures out.

Each judge takes a `Measured` (the row's pass under its faults, the pass it is measured
against, the row's scenario and parameters) and returns a `Verdict`: whether the
row's criterion (experiments/paper/rows.py states it in words) holds, the figures it
was decided on, and one line with them for paper.md; or, where the run cannot show the
claim (the faults touched none of the pair's traffic, the trigger of a mechanism never
came), INCONCLUSIVE with the reason, never a PASS on a weaker test. The fault rows are
judged on throughput in windows (experiments/analysis/timeseries.py) against the same
windows of the fault-free pass, by the rules of rows.py (`HELD`, `BAND`, `SETTLE_RTTS`);
the loaded variants on summary blocks (experiments/analysis/metrics.py). Judges read
only summary blocks and agent events, so they are tested on synthetic ones.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from experiments.analysis.metrics import goodput_series, path_failure_recovery
from experiments.analysis.slowdown import slowdown
from experiments.analysis.timeseries import (
    EPS_S,
    Window,
    paths_held,
    ratio,
    sends_by_path,
    span_mean,
    window_starts,
)
from experiments.paper.rows import (
    BAND,
    BASELINE,
    HELD,
    MIGRATE_RTTS,
    RETIRE_RTTS,
    SETTLE_RTTS,
    Row,
    payload_rate_mbit,
)
from experiments.run.play import Pass
from hosts.protocol import ev_plane
from topologies.model import Fabric
from topologies.paths import catalogue, path_index, path_nodes


@dataclass
class Measured:
    row: Row
    fabric: Fabric
    faulty: Pass
    reference: Pass | None
    fault_times: list[tuple[float, bool]] = field(default_factory=list)  # (t, up) steps
    faults: tuple = ()  # the row's timeline (experiments/faults Step)


@dataclass
class Verdict:
    passed: bool
    figures: dict
    measured: str  # one line: the figures the verdict was decided on
    # Why the run cannot show the row's claim (the verdict is then INCONCLUSIVE).
    inconclusive: str | None = None

    @property
    def outcome(self) -> str:
        return "INCONCLUSIVE" if self.inconclusive else "PASS" if self.passed else "FAIL"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _slowdowns(m: Measured) -> dict[str, dict]:
    return {b["transport"]: slowdown(b, m.reference.block(b["transport"]))
            for b in m.faulty.blocks}


def _others(m: Measured, entries: dict[str, dict], key: str, show) -> str:
    return "; ".join(f"{t} {show(e[key])}{_unfinished(e)}"
                     for t, e in entries.items() if t != "mrc")


def _unfinished(entry: dict) -> str:
    if entry["finished"]:
        return ""
    return " (job aborted)" if entry["note"].startswith("job aborted") else " (did not finish)"


def slowdown_at_most(m: Measured) -> Verdict:
    limit = m.row.params["limit"]
    entries = _slowdowns(m)
    mrc = entries["mrc"]
    passed = mrc["finished"] and mrc["slowdown"] is not None and mrc["slowdown"] <= limit
    return Verdict(passed, {"slowdown": entries, "limit": limit},
                   f"slowdown: mrc {_pct(mrc['slowdown'])} (limit {limit:.0%}); "
                   + _others(m, entries, "slowdown", _pct))


def proportional(m: Measured) -> Verdict:
    floor = 1 - m.row.params["lost"] - m.row.params["slack"]
    entries = _slowdowns(m)
    mrc = entries["mrc"]
    ratio = mrc["goodput_ratio"]
    passed = mrc["finished"] and ratio is not None and ratio >= floor
    return Verdict(passed, {"slowdown": entries, "floor": round(floor, 4)},
                   f"goodput against fault-free: mrc {_ratio(ratio)} (at least {floor:.2f}); "
                   + _others(m, entries, "goodput_ratio", _ratio))


def worst_plane_loss(fabric: Fabric, steps) -> float:
    """The largest share of one T0's uplinks in one plane that the faults take out of
    service at once (the T0-T1 links of each step, experiments/faults `links_out`)."""
    down: Counter = Counter()
    worst = 0.0
    for step in steps:
        links = Counter(link for link in step.fault.links_out(fabric) if link[0] == "t0t1")
        down = down - links if step.up else down + links
        per_t0 = Counter((plane, rack) for _, plane, rack, _ in down)
        worst = max(worst, max(per_t0.values(), default=0) / fabric.spec.t1_per_plane)
    return worst


def plane_floor(m: Measured) -> tuple[float, float]:
    """(the share of uplinks the worst T0 lost in one plane, the floor of goodput
    against fault-free it sets): MRC loads its planes equally (the paper's section 4),
    so the plane that lost most sets the pace of every flow through it; `slack` below
    the capacity left."""
    lost = worst_plane_loss(m.fabric, m.faults)
    return lost, 1 - lost - m.row.params["slack"]


def plane_bound(m: Measured) -> Verdict:
    """Goodput against fault-free at least the capacity left in the plane that lost
    most uplinks at one T0 (`plane_floor`)."""
    lost, floor = plane_floor(m)
    entries = _slowdowns(m)
    mrc = entries["mrc"]
    ratio = mrc["goodput_ratio"]
    passed = mrc["finished"] and ratio is not None and ratio >= floor
    return Verdict(passed, {"slowdown": entries, "worst_plane_loss": round(lost, 4),
                            "floor": round(floor, 4)},
                   f"goodput against fault-free: mrc {_ratio(ratio)} (at least {floor:.2f}: "
                   f"one T0 lost {lost:.0%} of its uplinks in a plane); "
                   + _others(m, entries, "goodput_ratio", _ratio))


def silent_t1(m: Measured) -> Verdict:
    """MRC within the plane bound; the baseline finished only after the T1 came back."""
    verdict = plane_bound(m)
    back = max((t for t, up in m.fault_times if up), default=None)
    base = m.faulty.block(BASELINE)
    stalled = not base["ok"] or (back is not None and base["workload_s"] >= back)
    verdict.passed = verdict.passed and stalled
    verdict.figures.update({"t1_back_s": back, "baseline_workload_s": base["workload_s"]})
    verdict.measured += (f"; {BASELINE} finished at {base['workload_s']:.2f} s, the T1 came "
                         f"back at {back:.2f} s" if base["ok"] else
                         f"; {BASELINE} did not finish")
    return verdict


def _mean_goodput(events: list[dict], start: float, t0: float, t1: float) -> float | None:
    values = [g for t, g in goodput_series(events, start) if t0 <= t < t1]
    return statistics.fmean(values) if values else None


def steady_state(m: Measured) -> Verdict:
    """MRC's goodput from `settle_s` after the failure on, against its fault-free run,
    at least the plane bound (`plane_floor`)."""
    settle = m.row.params["settle_s"]
    lost, limit = plane_floor(m)
    down = min((t for t, up in m.fault_times if not up), default=0.0)
    run, ref = m.faulty.run("mrc"), m.reference.run("mrc")
    after = _mean_goodput(m.faulty.events["mrc"], run.start, down + settle, run.end - run.start)
    clean = _mean_goodput(m.reference.events["mrc"], ref.start, 0.0, ref.end - ref.start)
    ratio = after / clean if after is not None and clean else None
    finished = m.faulty.block("mrc")["ok"]
    passed = finished and ratio is not None and ratio >= limit
    entries = _slowdowns(m)
    return Verdict(passed, {"steady_ratio": ratio, "worst_plane_loss": round(lost, 4),
                            "floor": round(limit, 4), "slowdown": entries},
                   f"mrc goodput from {down + settle:.1f} s on: {_ratio(ratio)} of fault-free "
                   f"(at least {limit:.2f}: one T0 lost {lost:.0%} of its uplinks in a plane); "
                   f"slowdown: mrc {_pct(entries['mrc']['slowdown'])}; "
                   + _others(m, entries, "slowdown", _pct))


def rtt_at_least_counted(m: Measured, measured_s: float) -> float:
    """A round trip to count in, never shorter than the fabric's with empty queues as
    counted (serialization at every hop): an emulated hop with nothing queued forwards
    at once, so a measured one can be a hundredth of it (docs/similarity.md "An idle
    hop forwards at once")."""
    return max(measured_s, m.fabric.spec.base_rtt_s)


def _rtt_s(m: Measured, events: list[dict]) -> float | None:
    """The senders' median smoothed RTT (`rtt_at_least_counted`)."""
    values = [e["srtt_ms"] / 1000 for e in events
              if e.get("event") == "progress" and e.get("srtt_ms")]
    return rtt_at_least_counted(m, statistics.median(values)) if values else None


# ---------------------------------------------------------------- the fault rows
# Judged on throughput in windows (rows.py `window_rtts`) from the run's start, against
# the same windows of the fault-free pass.


def _windows(m: Measured, played: Pass, flows=None) -> Window:
    """MRC's throughput in one pass, in windows of the row's length wherever they start."""
    p = m.row.params
    return Window(played.events["mrc"], played.run("mrc").start, p["window_s"],
                  flows if flows is not None else p["flows"])


def _series(m: Measured, played: Pass, flows=None) -> list[tuple[float, float | None]]:
    return _windows(m, played, flows).series(m.row.params["horizon_s"])


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _points(series: list[tuple[float, float | None]]) -> list[list]:
    """A series for paper.json and the plots: [window start, Mbit/s]."""
    return [[round(a, 4), _rounded(v, 3)] for a, v in series]


def _retired(played: Pass) -> int:
    return sum(1 for e in played.events["mrc"] if e.get("event") == "retire")


def _finished(m: Measured) -> bool:
    return bool(m.faulty.block("mrc")["ok"])


def _span_ratios(m: Measured, mine, clean) -> dict[str, float | None]:
    """Per span of the row's (name, from, to), MRC's mean over the windows lying within
    it against the fault-free pass's over the same windows."""
    w = m.row.params["window_s"]
    return {name: _rounded(ratio(span_mean(mine, w, a, b), span_mean(clean, w, a, b)))
            for name, a, b in m.row.params["spans"]}


def held(m: Measured) -> Verdict:
    """Throughput held: in each of the row's spans, MRC's mean over the windows lying
    within it against the fault-free pass's over the same windows, at least HELD.
    INCONCLUSIVE when no path of the pair's was retired (`retired`: the faults touched
    none of its traffic) or a span has no window both passes cover."""
    p = m.row.params
    mine, clean = _series(m, m.faulty), _series(m, m.reference)
    ratios = _span_ratios(m, mine, clean)
    retired = _retired(m.faulty)
    passed = _finished(m) and all(r is not None and r >= HELD for r in ratios.values())
    why = None
    if p.get("retired") and retired == 0:
        why = "no path of the pair's was retired: the faults touched none of its traffic"
    elif any(r is None for r in ratios.values()):
        missing = [name for name, r in ratios.items() if r is None]
        why = f"no window of {', '.join(missing)} that both passes cover"
    line = ("mrc throughput against fault-free, same windows: "
            + ", ".join(f"{name} {_ratio(r)}" for name, r in ratios.items())
            + f" (at least {HELD:g}); {retired} paths retired"
            + ("" if _finished(m) else "; did not finish")
            + (f"; INCONCLUSIVE: {why}" if why else ""))
    return Verdict(passed, {"ratios": ratios, "retired": retired,
                            "series": {"faults": _points(mine), "fault-free": _points(clean)},
                            "spans": p["spans"]}, line, why)


def glitch(m: Measured) -> Verdict:
    """A T0's transceiver flapping its host links (Figs. 6, 7): MRC's throughput while
    they flap, against the fault-free pass's same windows, at least the `floor` (the
    plane those hosts lose, less BAND); from the `after` span on (SETTLE_RTTS past the
    last flap) at least HELD; every byte delivered and no connection in error; and the
    losses on both sides of the flapping links: the `flapping` hosts' own connections
    and the `remote` senders' to them lost packets (a loss: a packet sent again for a
    loss or a timeout, not for a trim). INCONCLUSIVE when one side lost none (the flaps
    met no packet of its)."""
    p = m.row.params
    mine, clean = _series(m, m.faulty), _series(m, m.reference)
    ratios = _span_ratios(m, mine, clean)
    stats = m.faulty.run("mrc").stats
    lost = {f"h{h}": max(0, stats.get(h, {}).get("retransmits", 0)
                         - stats.get(h, {}).get("nacks", 0))
            for h in (*p["flapping"], *p["remote"])}
    errors = m.faulty.block("mrc")["agent_counters"].get("qp_errors", 0)
    floors = {"flapping": p["floor"], "after": HELD}
    passed = (_finished(m) and errors == 0
              and all(r is not None and r >= floors[name] for name, r in ratios.items()))
    quiet = [h for h, n in lost.items() if n == 0]
    why = (f"{', '.join(quiet)} lost no packet: the flaps met none of its traffic"
           if quiet else None)
    if why is None and any(r is None for r in ratios.values()):
        why = "no window of a span that both passes cover"
    line = (f"mrc throughput against fault-free, same windows: while flapping "
            f"{_ratio(ratios['flapping'])} (at least {p['floor']:.2f}), after "
            f"{_ratio(ratios['after'])} (at least {HELD:g}); packets lost: "
            + ", ".join(f"{h} {n}" for h, n in lost.items())
            + f"; {errors} connections in error"
            + ("" if _finished(m) else "; did not finish")
            + (f"; INCONCLUSIVE: {why}" if why else ""))
    return Verdict(passed, {"ratios": ratios, "lost": lost, "qp_errors": errors,
                            "series": {"faults": _points(mine), "fault-free": _points(clean)},
                            "spans": p["spans"]}, line, why)


def _back_rtts(m: Measured, level: tuple[float, float, float], mine: Window,
               clean: Window) -> float | None:
    """Base round trips from a level's start `a` to the first window (of the row's
    length, lying within [a, b), sliding from `a` a round trip at a time) whose
    throughput reaches the level's line: at least (1 - BAND) of the fault-free pass's
    same window times the level's `share`. Sliding reads the return to a round trip,
    where the row's fixed windows read it to a window (45 round trips at 10 Mbit/s,
    more than SETTLE_RTTS); the agents' progress samples, 50 ms apart, bound what it
    can resolve, and a window may reach the line up to BAND of its length before the
    throughput does."""
    a, b, share = level
    rtt, w = m.fabric.spec.base_rtt_s, m.row.params["window_s"]
    for step in range(int((b - a - w + EPS_S) / rtt) + 1):
        s = a + step * rtt
        value, ref = mine.mbps(s), clean.mbps(s)
        if value is not None and ref and value >= (1 - BAND) * share * ref:
            return float(step)
    return None


def capacity(m: Measured) -> Verdict:
    """Throughput proportional to the capacity left: for each of the row's levels (from
    a fault or a restore to the next), throughput is back at the remaining-capacity line
    (the fault-free pass's same window times the level's share) within SETTLE_RTTS
    round trips of its start (`_back_rtts`: a brief interruption; recovered), and the
    mean from SETTLE_RTTS after its start to its end is within BAND of the line."""
    p = m.row.params
    w, rtt = p["window_s"], m.fabric.spec.base_rtt_s
    settle = SETTLE_RTTS * rtt
    sliding = _windows(m, m.faulty), _windows(m, m.reference)
    mine, clean = (windows.series(p["horizon_s"]) for windows in sliding)
    levels, back, expected = {}, {}, []
    passed, why = _finished(m), None
    for a, b, share, label in p["levels"]:
        if share <= 0:
            why = f"{label}: no capacity left to be proportional to"
            continue
        back[label] = _back_rtts(m, (a, b, share), *sliding)
        level = ratio(span_mean(mine, w, a + settle, b), span_mean(clean, w, a + settle, b))
        levels[label] = _rounded(None if level is None else level / share)
        expected += [[round(s, 4), _rounded(None if ref is None else ref * share, 3)]
                     for s, ref in clean if s >= a - EPS_S and s + w <= b + EPS_S]
        if levels[label] is None:
            why = why or f"{label}: no window from {SETTLE_RTTS} round trips in"
        passed = (passed and back[label] is not None and back[label] <= SETTLE_RTTS
                  and levels[label] is not None and abs(levels[label] - 1) <= BAND)
    line = ("mrc against the remaining-capacity line: "
            + "; ".join(f"{label} {_ratio(levels[label])}, back in {_rtts(back[label])}"
                        for label in levels)
            + f" (within {BAND:.0%}, back within {SETTLE_RTTS} RTT)"
            + ("" if _finished(m) else "; did not finish")
            + (f"; INCONCLUSIVE: {why}" if why else ""))
    return Verdict(passed, {"levels": levels, "back_rtts": back,
                            "series": {"faults": _points(mine), "fault-free": _points(clean),
                                       "remaining capacity": expected}}, line, why)


def _rtts(value: float | None) -> str:
    return "never" if value is None else f"{value:g} RTT"


def line_rate(m: Measured) -> Verdict:
    """MRC's throughput from the end of the warm-up to the end of the judged time,
    cross-T1 (the row's pass) and T0-local (its reference), against the most payload a
    host's ports carry."""
    p = m.row.params
    ceiling = payload_rate_mbit(m.fabric, m.row.scenario.get("protocol", {}).get(
        "mtu_payload"))
    series, shares = {}, {}
    for name, played, flow in (("cross-T1", m.faulty, p["cross"]),
                               ("T0-local", m.reference, p["local"])):
        series[name] = _series(m, played, [flow])
        shares[name] = _rounded(ratio(span_mean(series[name], p["window_s"], p["warmup_s"],
                                                p["horizon_s"]), ceiling))
    finished = m.faulty.block("mrc")["ok"] and m.reference.block("mrc")["ok"]
    passed = finished and all(v is not None and v >= HELD for v in shares.values())
    why = (None if all(v is not None for v in shares.values())
           else "no window of the judged time that the pass covers")
    return Verdict(passed, {"line_share": shares, "ceiling_mbps": round(ceiling, 3),
                            "series": {k: _points(v) for k, v in series.items()}},
                   f"mrc throughput against {ceiling:.2f} Mbit/s of payload: "
                   + ", ".join(f"{k} {_ratio(v)}" for k, v in shares.items())
                   + f" (at least {HELD:g})" + ("" if finished else "; did not finish")
                   + (f"; INCONCLUSIVE: {why}" if why else ""), why)


def ev_loss(m: Measured) -> Verdict:
    """The lossy EV (EV-A) and its backup (EV-B) from the sender's per-packet events:
    EV-A retired within RETIRE_RTTS of its first lost packet, no data on it after that
    and its path never reinstated; EV-B idle from its allowance to the loss, carrying
    data in every window after EV-A's retirement; throughput from the loss on held."""
    p = m.row.params
    w, src, dst, plane = p["window_s"], p["src"], p["dst"], p["plane"]
    paths = [x for x in catalogue(m.fabric, src, dst) if x.plane == plane]
    index = {x.spine: i for i, x in enumerate(paths)}
    ev_a, ev_b = (plane, index[p["spine_a"]]), (plane, index[p["spine_b"]])

    def path_of(ev: int) -> tuple[int, int]:
        return ev_plane(ev), path_index(ev, len(paths))

    events, run = m.faulty.events["mrc"], m.faulty.run("mrc")
    # From the loss's start (less a round trip: a packet in flight then may be lost to
    # it): a make paper run once took a tail probe's resend of a packet of EV-A, 0.6 s
    # before the loss began, for its first lost packet, and judged the EV out 122
    # round trips late (it went 1.8 ms after the real first loss).
    since = run.start + p["loss_s"] - m.fabric.spec.base_rtt_s
    recovery = path_failure_recovery(events, src, dst, ev_a, path_of, since=since)
    sends = sends_by_path(events, src, dst, path_of, run.start, w, p["horizon_s"])
    starts = window_starts(w, 0.0, p["horizon_s"])
    zeros = [0] * len(starts)
    a_sends, b_sends = sends.get(ev_a, zeros), sends.get(ev_b, zeros)
    mine, clean = _series(m, m.faulty), _series(m, m.reference)
    held_ratio = _rounded(ratio(span_mean(mine, w, p["loss_s"], p["horizon_s"]),
                                span_mean(clean, w, p["loss_s"], p["horizon_s"])))
    before = [i for i, s in enumerate(starts)
              if s >= p["allowed_s"] - EPS_S and s + w <= p["loss_s"] + EPS_S]
    figures = {"ratio": held_ratio, "recovery": recovery,
               "series": {"faults": _points(mine), "fault-free": _points(clean)},
               "activity": {"windows": [round(s, 4) for s in starts],
                            f"EV-A (plane {plane}, T1 {p['spine_a']})": a_sends,
                            f"EV-B (plane {plane}, T1 {p['spine_b']})": b_sends},
               "loss_s": p["loss_s"]}
    why = None
    if ev_a == ev_b:
        why = "the connection has one path a plane: there is no backup EV"
    elif not any(a_sends[i] for i in before):
        why = "EV-A carried no data before the loss: it was not the active EV"
    elif recovery is None:
        why = "no packet of EV-A was lost"
    if why:
        return Verdict(False, figures, f"mrc: INCONCLUSIVE: {why}", why)
    rtt_s = rtt_at_least_counted(m, (recovery["rtt_median_ms"] or 0.0) / 1000)
    retire_rtts = (None if recovery["detect_ms"] is None
                   else round(recovery["detect_ms"] / 1000 / rtt_s, 2))
    out_at = recovery["failed_at"] - run.start + RETIRE_RTTS * m.fabric.spec.base_rtt_s
    after = [i for i, s in enumerate(starts) if s >= out_at - EPS_S]
    reinstated = sum(1 for e in events if e.get("event") == "reinstate"
                     and e.get("host") == src and e.get("peer") == dst
                     and (e.get("plane"), e.get("path")) == ev_a
                     and e["t"] >= recovery["failed_at"])
    a_after = sum(a_sends[i] for i in after)
    b_idle = sum(b_sends[i] for i in before)
    b_every = bool(after) and all(b_sends[i] > 0 for i in after)
    figures.update(retire_rtts=retire_rtts, ev_a_sends_after=a_after, reinstated=reinstated,
                   ev_b_sends_before=b_idle, ev_b_every_window=b_every)
    passed = (_finished(m) and retire_rtts is not None and retire_rtts <= RETIRE_RTTS
              and a_after == 0 and reinstated == 0 and b_idle == 0 and b_every
              and held_ratio is not None and held_ratio >= HELD)
    return Verdict(passed, figures,
                   f"mrc: EV-A retired {_rtts(retire_rtts)} after its first lost packet "
                   f"(at most {RETIRE_RTTS}), {a_after} packets on it after, path reinstated "
                   f"{reinstated} times; EV-B {b_idle} packets before, "
                   f"{'data in every window' if b_every else 'idle in some window'} after; "
                   f"throughput from the loss {_ratio(held_ratio)} of without it (at least "
                   f"{HELD:g})" + ("" if _finished(m) else "; did not finish"))


def lossy_plane(m: Measured) -> Verdict:
    """A NIC link losing packets, then a denylist entry for its plane (section 4), from
    both connections' per-packet events. Before the entry MRC keeps the plane in use:
    paths of it are reinstated by their probes (`returns`) and retired again
    (`retired_again`: retirements of a connection's path after its own reinstatement).
    From the moment each host applied the entry (its `deny` events) it sends nothing
    on the plane; from SETTLE_RTTS after the entry the throughput is within BAND of the
    remaining-capacity line (`share` of the fault-free pass's same windows).
    INCONCLUSIVE when no path of the plane was retired: the loss touched no packet."""
    p = m.row.params
    w, plane, loss_s, entry_s = p["window_s"], p["plane"], p["loss_s"], p["entry_s"]
    events, start = m.faulty.events["mrc"], m.faulty.run("mrc").start

    def on_plane(kind: str) -> list[dict]:
        return [e for e in events if e.get("event") == kind and e.get("plane") == plane]

    def before_entry(kind: str) -> list[tuple[float, tuple]]:
        """(time, (host, peer, path)) of the plane's `kind` events from the loss to
        the entry."""
        return sorted((e["t"] - start, (e["host"], e.get("peer"), e.get("path")))
                      for e in on_plane(kind) if loss_s - EPS_S <= e["t"] - start < entry_s)

    retired, returned = before_entry("retire"), before_entry("reinstate")
    # A path of the connection retired after a reinstatement of its own.
    back_at: dict[tuple, float] = {}
    for t, path in returned:
        back_at.setdefault(path, t)
    again = sum(1 for t, path in retired if path in back_at and t > back_at[path])
    applied = {}  # host -> when it applied the entry
    for e in on_plane("deny"):
        applied[e["host"]] = max(applied.get(e["host"], 0.0), e["t"])
    hosts = {s for s, _ in p["flows"]}
    sends_after = sum(1 for e in events if e.get("event") == "send"
                      and ev_plane(e["ev"]) == plane
                      and e["t"] >= applied.get(e["host"], start + entry_s))
    mine, clean = _series(m, m.faulty), _series(m, m.reference)
    after = entry_s + SETTLE_RTTS * m.fabric.spec.base_rtt_s
    level = ratio(span_mean(mine, w, after, p["horizon_s"]),
                  span_mean(clean, w, after, p["horizon_s"]))
    level = _rounded(None if level is None else level / p["share"])
    expected = [[round(s, 4), _rounded(ref * p["share"], 3)] for s, ref in clean
                if s >= entry_s - EPS_S and ref is not None]
    figures = {"lost_before": len(retired), "returns": len(returned),
               "retired_again": again, "entry_applied": set(applied) == hosts,
               "sends_after_entry": sends_after, "level": level,
               "series": {"faults": _points(mine), "fault-free": _points(clean),
                          "remaining capacity": expected}}
    why = None if retired else "no path of the lossy plane was retired: the loss touched none"
    passed = (_finished(m) and again > 0 and figures["entry_applied"]
              and sends_after == 0 and level is not None and abs(level - 1) <= BAND)
    return Verdict(passed, figures,
                   f"mrc: before the entry {len(retired)} retirements of plane {plane}'s "
                   f"paths, {len(returned)} reinstatements, {again} retirements of a path "
                   f"after its own return; "
                   f"{sends_after} packets on the plane after the entry"
                   + ("" if figures["entry_applied"] else " (the entry did not reach every "
                      "host)")
                   + f"; throughput from {SETTLE_RTTS} RTT after it {_ratio(level)} of the "
                   f"remaining-capacity line (within {BAND:.0%})"
                   + ("" if _finished(m) else "; did not finish")
                   + (f"; INCONCLUSIVE: {why}" if why else ""), why)


def ecn_separation(m: Measured) -> Verdict:
    """The first ECN migration after the second flow joins, in round trips (the senders'
    smoothed RTT, `rtt_at_least_counted`); whether the two flows' EVs share a path at
    any time from it to the end of the judged time (`paths_held`, every EV starting on
    the pinned path); each flow's throughput from the join on against the same windows
    of the reference."""
    p = m.row.params
    w, join, horizon = p["window_s"], p["join_s"], p["horizon_s"]
    events, run = m.faulty.events["mrc"], m.faulty.run("mrc")
    evs = max(1, (m.row.scenario.get("protocol", {}).get("ev_count") or 0)
              // m.fabric.spec.planes)
    moved = sorted(e["t"] - run.start for e in events
                   if e.get("event") == "migrate" and e["t"] - run.start >= join)
    rtt = _rtt_s(m, events)
    first = round((moved[0] - join) / rtt, 2) if moved and rtt else None
    starts = m.row.scenario["params"].get("start_s") or [0.0] * len(p["flows"])
    held_by = {}
    for f, begun in zip(p["flows"], starts):
        steps = paths_held(events, f[0], f[1], {p["pinned"]: evs}, run.start)
        # A flow holds its EVs from its start on.
        held_by[tuple(f)] = ([(0.0, {})] if begun > 0 else []) + [
            (max(t, begun), held_now) for t, held_now in steps]

    def at(steps, t: float) -> set[int]:
        now = steps[0][1]
        for s, held_now in steps:
            if s <= t:
                now = held_now
        return {path for path, n in now.items() if n > 0}

    times = sorted({s for steps in held_by.values() for s, _ in steps
                    if moved and moved[0] <= s <= horizon} | ({moved[0]} if moved else set()))
    (one, two) = held_by.values()
    shared = [round(t, 4) for t in times if at(one, t) & at(two, t)]
    separated = bool(moved) and not shared
    shares, series = {}, {}
    for f in p["flows"]:
        name = f"h{f[0]}->h{f[1]}"
        mine, clean = _series(m, m.faulty, [f]), _series(m, m.reference, [f])
        series[name] = _points(mine)
        shares[name] = _rounded(ratio(span_mean(mine, w, join, horizon),
                                      span_mean(clean, w, join, horizon)))
    echoes = m.faulty.block("mrc").get("agent_counters", {}).get("ecn_echoes")
    why = None
    if not moved and echoes == 0:
        why = "no ECN mark came: the shared path's queue never reached the threshold"
    passed = (_finished(m) and first is not None and first <= MIGRATE_RTTS and separated
              and all(s is not None and s >= HELD for s in shares.values()))
    figures = {"first_migration_rtts": first, "migrations": len(moved),
               "rtt_ms": rtt and round(rtt * 1000, 3), "shares": shares,
               "shared_at_s": shared, "ecn_echoes": echoes, "series": series,
               "held": {f"h{f[0]}->h{f[1]}": [[round(s, 4), {str(k): v for k, v in h.items()}]
                                             for s, h in steps]
                        for f, steps in held_by.items()}, "join_s": join}
    return Verdict(passed, figures,
                   f"first migration {'n/a' if first is None else f'{first:g}'} RTT after "
                   f"flow 2 joined (at most {MIGRATE_RTTS}; {len(moved)} in all); "
                   + ("flows on separate paths after it" if separated else
                      "flows never separated" if not moved else
                      f"a path shared again at {shared[0]:g} s")
                   + "; throughput from the join against spread EVs: "
                   + ", ".join(f"{k} {_ratio(v)}" for k, v in shares.items())
                   + f" (at least {HELD:g})" + ("" if _finished(m) else "; did not finish")
                   + (f"; INCONCLUSIVE: {why}" if why else ""), why)


def lost_per_connection(m: Measured) -> Verdict:
    """Packets lost per connection (`_lost`), with links down from the start; fewer
    than `limit`. INCONCLUSIVE when the links down cut no path of the connections."""
    limit = m.row.params["limit"]
    block = m.faulty.block("mrc")
    lost = _lost(block)
    pairs = _connections(block)
    broken = sum(broken_paths(m.fabric, m.faults, s, d) for s, d in pairs)
    per = round(lost / max(1, len(pairs)), 2)
    why = None if broken else "the links down cut no path of the connections"
    passed = bool(block["ok"]) and per < limit
    return Verdict(passed, {"lost": {"packets": lost, "connections": len(pairs),
                                     "per_connection": per, "broken_paths": broken}},
                   f"mrc lost {lost} packets over {len(pairs)} connections: {per:g} a "
                   f"connection (fewer than {limit}), {broken} broken paths among them"
                   + ("" if block["ok"] else "; did not finish")
                   + (f"; INCONCLUSIVE: {why}" if why else ""), why)


def size_curve(block: dict, hosts: int) -> dict[int, float]:
    """Throughput per host (Mbit/s) at each message size of a sweep: every phase of
    the size, delivered bytes over their time together (Fig. 16, 17)."""
    bits: Counter = Counter()
    seconds: Counter = Counter()
    for ph in block.get("phases") or []:
        size, duration = ph["message_bytes"], ph["duration_s"]
        if isinstance(size, list) or not duration or ph.get("goodput_mbps") is None:
            continue
        bits[size] += ph["goodput_mbps"] * duration
        seconds[size] += duration
    return {size: round(bits[size] / seconds[size] / hosts, 4) for size in sorted(bits)}


def _curves(m: Measured) -> dict[str, dict[int, float]]:
    return {b["transport"]: size_curve(b, len(m.fabric.hosts)) for b in m.faulty.blocks}


def qp_order(m: Measured) -> Verdict:
    """At the sweep's largest size: MRC against 16 QPs against 1 QP."""
    slack = m.row.params["slack"]
    curves = _curves(m)
    largest = max(curves["mrc"], default=None)
    at = {t: c.get(largest, 0.0) for t, c in curves.items()}
    # A baseline that did not finish still has its throughput: what it delivered in time.
    passed = (m.faulty.block("mrc")["ok"] and largest is not None
              and at["mrc"] >= slack * at["roce-16"] > 0 and at["roce-16"] > at["roce"])
    return Verdict(passed, {"curves": curves, "at_largest": at},
                   f"per-host throughput at {(largest or 0) / 1000:g} kB (Mbit/s): "
                   + ", ".join(f"{t} {g:.2f}"
                               + ("" if m.faulty.block(t)["ok"] else " (did not finish)")
                               for t, g in at.items()))


def qp_scaling(m: Measured) -> Verdict:
    """RoCE's per-host throughput at the sweep's largest size for each count of QPs:
    8 QPs at least `helps` x 1 QP, 16 QPs at most `beyond` x 8 QPs. A transport that
    did not finish is reported as such and fails the claim it is needed for."""
    p = m.row.params
    curves = _curves(m)
    largest = max(curves["mrc"], default=None)
    at = {t: (c.get(largest) if m.faulty.block(t)["ok"] else None) for t, c in curves.items()}
    one, eight, sixteen = at.get("roce"), at.get("roce-8"), at.get("roce-16")
    helps = one is not None and eight is not None and eight >= p["helps"] * one
    little_beyond = eight is not None and sixteen is not None and sixteen <= p["beyond"] * eight
    return Verdict(largest is not None and helps and little_beyond,
                   {"curves": curves, "at_largest": at},
                   f"per-host throughput at {(largest or 0) / 1000:g} kB (Mbit/s): "
                   + ", ".join(f"{t} {'did not finish' if g is None else f'{g:.2f}'}"
                               for t, g in at.items())
                   + f" (8 QPs at least {p['helps']:g} x 1 QP; 16 at most {p['beyond']:g} x 8)")


def loss_ratio(m: Measured) -> Verdict:
    p = m.row.params
    entries = _slowdowns(m)
    mrc = entries["mrc"]["goodput_ratio"]
    passed = mrc is not None and mrc >= p["mrc"]
    if "baseline" in p:
        base = entries[p["baseline"]]["goodput_ratio"]
        passed = passed and base is not None and base <= p["baseline_factor"] * mrc
    return Verdict(passed, {"goodput_ratio": {t: e["goodput_ratio"] for t, e in entries.items()},
                            "slowdown": entries, "curves": _curves(m)},
                   f"goodput against loss-free: mrc {_ratio(mrc)} (at least {p['mrc']:.2f}); "
                   + _others(m, entries, "goodput_ratio", _ratio))


def sizes(m: Measured) -> Verdict:
    """MRC's time for each size's phase against the best baseline's, within `slack`
    and one round trip as counted (a latency-bound phase of a few round trips varies
    by about one with the agents' scheduling); a baseline phase that delivered nothing
    in time counts as endless."""
    per = _phase_times(m.faulty)
    ok, rows = _mrc_within_best(m, per)
    no_help = m.row.params.get("qps_no_help")
    if no_help is not None and per["mrc"]:
        # RoCE's other side: 16 QPs do not beat 1 QP at the largest size.
        size = max(per["mrc"])
        one, sixteen = (per[t].get(size) or float("inf") for t in ("roce", "roce-16"))
        ok = ok and sixteen >= no_help * one
        rows.append(f"RoCE at {size / 1000:g} kB: 16 QPs {_phase_s(sixteen)} against 1 QP "
                    f"{_phase_s(one)} (at least {no_help:g} x)")
    return Verdict(ok, {"phase_s": {t: {str(k): v for k, v in d.items()} for t, d in per.items()},
                        "curves": _curves(m)},
                   "; ".join(rows) or "no phases measured")


def _phase_times(played: Pass) -> dict[str, dict[int, float | None]]:
    """Each transport's phase time at each message size of a sweep."""
    return {b["transport"]: {ph["message_bytes"]: ph["duration_s"] for ph in b["phases"]}
            for b in played.blocks}


def _mrc_within_best(m: Measured, per: dict[str, dict[int, float | None]]
                     ) -> tuple[bool, list[str]]:
    """Whether MRC's phase at every size of `per` (`_phase_times`) took at most the
    row's `slack` times the best baseline's plus one round trip as counted (a phase
    that delivered nothing in time counts as endless), and a line per size."""
    slack, rtt = m.row.params["slack"], m.fabric.spec.base_rtt_s
    ok = bool(per["mrc"]) and m.faulty.block("mrc")["ok"]
    shown = []
    for size in sorted(per["mrc"]):
        best_t, best = min(((t, per[t].get(size) or float("inf")) for t in per if t != "mrc"),
                           key=lambda x: x[1])
        mine = per["mrc"][size]
        ok = ok and mine is not None and mine <= slack * best + rtt
        shown.append(f"{size / 1000:g} kB: mrc {_phase_s(mine)}, {best_t} {_phase_s(best)}")
    return ok, shown


def _phase_s(seconds: float | None) -> str:
    """A phase's time, or that it delivered nothing in time: never a number then."""
    if seconds is None or seconds == float("inf"):
        return "did not finish"
    return f"{seconds:.2f} s"


def loss_sizes(m: Measured) -> Verdict:
    """The all-to-all sweep with loss (Fig. 17's dashed lines), against the same sweep
    without it (the reference): MRC's phase time at every size within `slack` of the
    best baseline's and one round trip (as `sizes`); at the smallest size the loss
    slows `baseline` down more than MRC (each one's time with the loss over without),
    and by more than at the largest size; with `barely`, the baseline's time at the
    largest size at most that many times its time without the loss. A phase that
    delivered nothing in time counts as endless."""
    p = m.row.params
    base = p["baseline"]
    lossy, clean = _phase_times(m.faulty), _phase_times(m.reference)

    def slowed(transport: str, size: int) -> float:
        with_loss = lossy[transport].get(size) or float("inf")
        without = clean.get(transport, {}).get(size)
        return with_loss / without if without else float("inf")

    swept = sorted(lossy["mrc"])
    ok, shown = _mrc_within_best(m, lossy)
    slowdown = {t: {str(size): _rounded(slowed(t, size), 3) for size in swept}
                for t in ("mrc", base)}
    if swept:
        small, large = swept[0], swept[-1]
        gap_small = slowed(base, small) - slowed("mrc", small)
        gap_large = slowed(base, large) - slowed("mrc", large)
        ok = ok and gap_small > 0 and gap_small > gap_large
        shown.append(f"loss slows {base} {slowed(base, small):.2f} x and mrc "
                     f"{slowed('mrc', small):.2f} x at {small / 1000:g} kB, {base} "
                     f"{slowed(base, large):.2f} x and mrc {slowed('mrc', large):.2f} x at "
                     f"{large / 1000:g} kB")
        if "barely" in p:
            ok = ok and slowed(base, large) <= p["barely"]
            shown[-1] += f" ({base} at most {p['barely']:g} x at the largest)"
    return Verdict(ok, {"phase_s": {t: {str(k): v for k, v in d.items()}
                                    for t, d in lossy.items()},
                        "slowed": slowdown, "curves": _curves(m)},
                   "; ".join(shown) or "no phases measured")


def victim(m: Measured) -> Verdict:
    """The victim's throughput while the incast ran against the same flow alone, for
    each transport; MRC's at least `share`, every RoCE's below `suffers` (the paper's
    other side: PFC spreads the incast's congestion to the victim). A victim that did
    not finish suffered, and is reported as not finished, never as a number."""
    p = m.row.params
    figures = {}
    for block in m.faulty.blocks:
        alone = m.reference.block(block["transport"])["goodput_mbps"]
        under = (block.get("victim_throughput") or {}).get("during_incast_mbps")
        figures[block["transport"]] = round(under / alone, 4) if under and alone else None
    mrc = figures["mrc"]
    roce = {t: v for t, v in figures.items() if t != "mrc"}
    mrc_holds = mrc is not None and mrc >= p["share"]
    roce_suffers = all(v is None or v < p["suffers"] for v in roce.values())
    return Verdict(mrc_holds and roce_suffers, {"victim_share": figures},
                   "victim throughput during the incast against alone: "
                   + ", ".join(f"{t} {_ratio(v) if v is not None else 'did not finish'}"
                               for t, v in figures.items())
                   + f" (MRC at least {p['share']:.2f}; RoCE below {p['suffers']:.2f})")


def dcqcn_queue(m: Measured) -> Verdict:
    """A 15:1 incast whose flows arrive `every_s` apart, RoCE with one DCQCN profile
    (Fig. 22): the share of the receiver's line rate the incast gets from the second
    arrival to one interval after the last (the bottleneck throughput), and the
    receiving ToR's queue to it over the same time (block `queue`): how often it is
    empty, its mean, how often the ToR pauses a sender (PFC), and how many flows had
    arrived at its first pause. `expect` says which of the paper's outcomes the
    profile had: "pfc" (the queue controlled for the first `controlled` flows, then
    pauses, the bottleneck at least `line` of line rate) or "loses" (the ToR pausing in
    at most `paused` of the samples, the queue empty in at least `empty` of them, the
    bottleneck between `low` and `high` of line rate)."""
    p = m.row.params
    transport, every, flows = p["transport"], p["every_s"], [tuple(f) for f in p["flows"]]
    block, run = m.faulty.block(transport), m.faulty.run(transport)
    t0, t1 = every, len(flows) * every
    ceiling = payload_rate_mbit(m.fabric)
    window = Window(m.faulty.events[transport], run.start, t1 - t0, flows)
    share = _rounded(ratio(window.mbps(t0), ceiling))
    queue = block.get("queue") or {}
    frame = m.fabric.spec.data_frame_bytes
    inside = [s for s in queue.get("samples", []) if t0 <= s[0] < t1]
    pausing = [s for s in queue.get("samples", []) if s[2] > 0]
    first = pausing[0][0] if pausing else None
    figures = {
        "line_share": share, "ceiling_mbps": round(ceiling, 3),
        "empty_share": _rounded(statistics.fmean(s[1] < frame for s in inside)
                                if inside else None),
        "paused_share": _rounded(statistics.fmean(s[2] > 0 for s in inside)
                                 if inside else None),
        "mean_frames": _rounded(statistics.fmean(s[1] for s in inside) / frame
                                if inside else None, 2),
        "flows_at_first_pause": None if first is None else min(len(flows),
                                                                int(first // every) + 1),
        "queue": {"port": queue.get("port"), "frame_bytes": frame,
                  "samples": queue.get("samples", [])},
        "arrivals_s": [round(i * every, 4) for i in range(len(flows))]}
    why = ("no queue samples (the switch ports do not run the eBPF program)" if not inside
           else "no throughput measured over the incast" if share is None else None)
    if p["expect"] == "pfc":
        at = figures["flows_at_first_pause"]
        passed = (at is not None and p["controlled"] <= at <= len(flows)
                  and share is not None and share >= p["line"])
        said = (f"first PFC pause with {at if at is not None else 'no'} flows arrived "
                f"(after at least {p['controlled']}, before the end); bottleneck "
                f"{_ratio(share)} of line rate (at least {p['line']:g})")
    else:
        passed = (share is not None and p["low"] <= share <= p["high"]
                  and figures["paused_share"] is not None
                  and figures["paused_share"] <= p["paused"]
                  and figures["empty_share"] >= p["empty"])
        said = (f"bottleneck {_ratio(share)} of line rate ({p['low']:g} to {p['high']:g}); "
                f"ToR pausing in {_ratio(figures['paused_share'])} of the samples (at most "
                f"{p['paused']:g}); queue empty in {_ratio(figures['empty_share'])} (at "
                f"least {p['empty']:g})")
    said += (f"; mean queue {figures['mean_frames']} frames"
             + ("" if block["ok"] else f"; {transport} did not finish"))
    return Verdict(passed, figures, f"{transport}: {said}", why)


def transceiver(m: Measured) -> Verdict:
    """MRC's goodput while the ports are down (from `settle_s` after) and after they
    return (from `settle_s` after), each against its fault-free mean."""
    p = m.row.params
    down = min((t for t, up in m.fault_times if not up), default=None)
    back = max((t for t, up in m.fault_times if up), default=None)
    run, ref = m.faulty.run("mrc"), m.reference.run("mrc")
    clean = _mean_goodput(m.reference.events["mrc"], ref.start, 0.0, ref.end - ref.start)
    events, end = m.faulty.events["mrc"], run.end - run.start

    def share(t0: float | None, t1: float | None) -> float | None:
        if t0 is None or t1 is None or not clean:
            return None
        value = _mean_goodput(events, run.start, t0 + p["settle_s"], t1)
        return None if value is None else round(value / clean, 4)

    during, after = share(down, back), share(back, end)
    floor = 1 - p["lost"] - p["slack"]
    passed = (m.faulty.block("mrc")["ok"] and during is not None and during >= floor
              and after is not None and after >= p["recovered"])
    entries = _slowdowns(m)
    return Verdict(passed, {"down_share": during, "after_share": after,
                            "floor": round(floor, 4), "slowdown": entries},
                   f"mrc goodput against fault-free: ports down {_ratio(during)} (at least "
                   f"{floor:.2f}), back {_ratio(after)} (at least {p['recovered']:.2f}); "
                   "slowdown: " + ", ".join(f"{t} {_pct(e['slowdown'])}{_unfinished(e)}"
                                            for t, e in entries.items()))


def _connections(block: dict) -> list[tuple[int, int]]:
    return sorted({(f["src"], f["dst"]) for f in block["flow_throughput"]["flows"]})


def broken_paths(fabric: Fabric, steps, src: int, dst: int) -> int:
    """How many of the paths from `src` to `dst` the faults in place before the start
    cut."""
    faults = [s.fault for s in steps if s.before_start and not s.up]
    name = fabric.hosts[src].name
    return sum(1 for path in catalogue(fabric, src, dst)
               if any(f.cuts(path_nodes(fabric, path.usids, name), path.plane)
                      for f in faults))


def _lost(block: dict) -> int:
    """Packets a transport lost: retransmissions whose original neither arrived after
    all (`duplicates`) nor was trimmed on a congested queue (`trimmed_rx`: its header
    arrived and was NACKed)."""
    counters = block["agent_counters"]
    return max(0, counters.get("retransmits", 0) - counters.get("duplicates", 0)
               - counters.get("trimmed_rx", 0))


def startup_losses(m: Measured) -> Verdict:
    """Packets lost (`_lost`) per connection and per broken path it sprays over, with
    links down from the start."""
    limit = m.row.params["per_broken_path"]
    figures = {}
    for b in m.faulty.blocks:
        lost = _lost(b)
        pairs = _connections(b)
        broken = sum(broken_paths(m.fabric, m.faults, s, d) for s, d in pairs)
        figures[b["transport"]] = {"per_connection": round(lost / max(1, len(pairs)), 2),
                                   "per_broken_path": round(lost / broken, 2) if broken else None,
                                   "broken_paths_per_connection":
                                       round(broken / max(1, len(pairs)), 2)}
    mrc = figures["mrc"]
    passed = (m.faulty.block("mrc")["ok"] and mrc["per_broken_path"] is not None
              and mrc["per_broken_path"] <= limit)
    return Verdict(passed, {"lost": figures},
                   f"mrc lost {mrc['per_connection']:g} packets a connection, "
                   f"{mrc['broken_paths_per_connection']:g} of its paths broken: "
                   f"{mrc['per_broken_path']} a broken path (at most {limit}); "
                   + "; ".join(f"{t} {f['per_connection']:g} a connection"
                               for t, f in figures.items() if t != "mrc"))


def permutation(m: Measured) -> Verdict:
    """Each transport's slowest flow against the line rate's payload and against its
    own flows' mean: MRC's flows even, and its slowest above the 1-QP RoCE's; the 1-QP
    RoCE's slowest at most `collided` of the line rate (the paper's other side: its
    flows collide on ECMP)."""
    p = m.row.params
    ceiling = payload_rate_mbit(m.fabric)
    slowest, evenness = {}, {}
    for b in m.faulty.blocks:
        means = [f["mean_mbps"] or 0.0 for f in b["flow_throughput"]["flows"]]
        low = min(means, default=0.0)
        slowest[b["transport"]] = round(low / ceiling, 4)
        evenness[b["transport"]] = round(low / statistics.fmean(means), 4) if any(means) else 0.0
    mrc, base = slowest["mrc"], slowest.get(p["against"])
    collided = base is not None and base <= p["collided"]
    passed = (m.faulty.block("mrc")["ok"] and evenness["mrc"] >= p["even"] and collided
              and mrc >= p["margin"] * base)
    return Verdict(passed, {"slowest_flow_share": slowest, "slowest_of_mean": evenness,
                            "ceiling_mbps": round(ceiling, 3)},
                   "slowest flow against the line rate's payload (and against the mean of "
                   "its transport's flows): " + ", ".join(
                       f"{t} {_ratio(v)} ({_ratio(evenness[t])})" for t, v in slowest.items())
                   + f" ({p['against']} at most {p['collided']:.2f})")


# The figures each judge decides on, by their path in its figures (a prefix takes every
# figure under it): paper.md gives their median and range over the repetitions.
DECIDING = {
    "held": ("ratios",),
    "glitch": ("ratios", "lost"),
    "capacity": ("levels", "back_rtts"),
    "line_rate": ("line_share",),
    "ev_loss": ("retire_rtts", "ratio", "ev_a_sends_after", "reinstated"),
    "lossy_plane": ("returns", "retired_again", "sends_after_entry", "level"),
    "ecn_separation": ("first_migration_rtts", "shares"),
    "lost_per_connection": ("lost.per_connection",),
    "slowdown_at_most": ("slowdown.mrc.slowdown",),
    "proportional": ("slowdown.mrc.goodput_ratio",),
    "plane_bound": ("slowdown.mrc.goodput_ratio",),
    "silent_t1": ("slowdown.mrc.goodput_ratio", "baseline_workload_s"),
    "steady_state": ("steady_ratio",),
    "qp_order": ("at_largest",),
    "qp_scaling": ("at_largest",),
    "loss_ratio": ("goodput_ratio",),
    "sizes": ("phase_s.mrc",),
    "loss_sizes": ("phase_s.mrc", "slowed"),
    "victim": ("victim_share",),
    "transceiver": ("down_share", "after_share"),
    "startup_losses": ("lost.mrc.per_broken_path",),
    "permutation": ("slowest_of_mean.mrc", "slowest_flow_share"),
    "dcqcn_queue": ("line_share", "flows_at_first_pause", "empty_share", "paused_share"),
}

def judge(m: Measured) -> Verdict:
    """The row's judge, then the check every comparison with the fault-free pass rests
    on: that pass retired no path (`fault_free_retired`). A retirement there came from
    the machine, not a fault (hosts/loss_detection.py), and the row would be judged
    against a pass that lost paths too: INCONCLUSIVE, with the count."""
    verdict = JUDGES[m.row.judge](m)
    if not m.row.fault_free_reference or m.reference is None or "mrc" not in m.reference.events:
        return verdict
    retired = _retired(m.reference)
    verdict.figures["fault_free_retired"] = retired
    verdict.measured += f"; the fault-free pass retired {retired} paths"
    if retired and not verdict.inconclusive:
        verdict.inconclusive = (f"the fault-free pass retired {retired} paths: it is not "
                                "the fault-free reference the row needs")
        verdict.measured += f" (INCONCLUSIVE: {verdict.inconclusive})"
    return verdict


JUDGES = {f.__name__: f for f in (
    held, glitch, capacity, line_rate, ev_loss, lossy_plane, ecn_separation, lost_per_connection,
    slowdown_at_most, proportional, plane_bound, silent_t1, steady_state, qp_order,
    qp_scaling, loss_ratio, sizes, loss_sizes, victim, dcqcn_queue, transceiver,
    startup_losses, permutation)}
