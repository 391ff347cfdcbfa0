"""Verdicts of the paper's rows (pure): measured figures in, PASS or FAIL and the figures out.

Each judge takes a `Measured` (the row's pass under its faults, the pass it is measured
against, the row's scenario and parameters) and returns a `Verdict`: whether the
row's criterion (experiments/paper/rows.py states it in words) holds, the figures it
was decided on, and one line with them for paper.md. Judges read only summary blocks
(experiments/analysis/metrics.py) and agent events, so they are tested on synthetic ones.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from experiments.analysis.metrics import flow_mbps, goodput_series, path_failure_recovery
from experiments.analysis.slowdown import slowdown
from experiments.paper.rows import BASELINE, Row, payload_rate_mbit
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


def gray_loss(m: Measured) -> Verdict:
    """Detection of the lossy path in RTTs (per-packet events), and the goodput kept."""
    p = m.row.params
    params = m.row.scenario["params"]
    src, dst = params["src"], params["dst"]
    paths = [x for x in catalogue(m.fabric, src, dst) if x.plane == p["plane"]]
    index = next(i for i, x in enumerate(paths) if x.spine == p["spine"])

    def path_of(ev: int) -> tuple[int, int]:
        return ev_plane(ev), path_index(ev, len(paths))

    recovery = path_failure_recovery(m.faulty.events["mrc"], src, dst,
                                     (p["plane"], index), path_of)
    entries = _slowdowns(m)
    ratio = entries["mrc"]["goodput_ratio"]
    counted_ms = m.fabric.spec.base_rtt_s * 1000
    rtt_ms = (rtt_at_least_counted(m, (recovery["rtt_median_ms"] or 0.0) / 1000) * 1000
              if recovery else None)
    rtts = (recovery["detect_ms"] / rtt_ms
            if recovery and recovery["detect_ms"] is not None else None)
    passed = (rtts is not None and rtts <= p["rtts"] and ratio is not None
              and ratio >= p["limit"])
    detect = ("no lost packet on the path" if recovery is None else
              f"retired {recovery['detect_ms']} ms = {rtts:.1f} RTT of {rtt_ms:.1f} ms "
              f"(measured {recovery['rtt_median_ms']} ms, counted {counted_ms:.1f} ms) after "
              "its first lost packet" if rtts is not None else "never retired")
    return Verdict(passed, {"recovery": recovery, "detect_rtts": rtts, "rtt_ms": rtt_ms,
                            "slowdown": entries},
                   f"mrc: {detect}; goodput against loss-free: mrc {_ratio(ratio)} "
                   f"(at least {p['limit']:.2f}); "
                   + _others(m, entries, "goodput_ratio", _ratio))


def _rtt_s(m: Measured, events: list[dict]) -> float | None:
    """The senders' median smoothed RTT (`rtt_at_least_counted`)."""
    values = [e["srtt_ms"] / 1000 for e in events
              if e.get("event") == "progress" and e.get("srtt_ms")]
    return rtt_at_least_counted(m, statistics.median(values)) if values else None


def _together(run) -> tuple[float, float]:
    """The second half of the time every transfer of `run` was under way."""
    start = max(t.start for t in run.transfers)
    end = min((t.delivered for t in run.transfers if t.delivered is not None),
              default=run.end)
    return (start + end) / 2, end


def ecn_migration(m: Measured) -> Verdict:
    """The first migration after the last flow joins, in RTTs; each flow's throughput
    in the second half of the flows' time together against the same in the reference."""
    p = m.row.params
    events = m.faulty.events["mrc"]
    run, ref = m.faulty.run("mrc"), m.reference.run("mrc")
    joined = max(t.start for t in run.transfers)
    moved = [e["t"] for e in events if e.get("event") == "migrate" and e["t"] >= joined]
    rtt = _rtt_s(m, events)
    first = (min(moved) - joined) / rtt if moved and rtt else None
    (a, b), (ra, rb) = _together(run), _together(ref)
    shares = {}
    for t in run.transfers:
        pinned = flow_mbps(events, t.src, t.dst, a, b)
        alone = flow_mbps(m.reference.events["mrc"], t.src, t.dst, ra, rb)
        shares[f"h{t.src}->h{t.dst}"] = (round(pinned / alone, 4)
                                         if pinned is not None and alone else None)
    passed = (m.faulty.block("mrc")["ok"] and first is not None and first <= p["rtts"]
              and all(s is not None and s >= p["share"] for s in shares.values()))
    return Verdict(passed, {"first_migration_rtts": first, "migrations": len(moved),
                            "rtt_ms": rtt and round(rtt * 1000, 3), "shares": shares},
                   f"first migration {'n/a' if first is None else f'{first:.1f}'} RTT after "
                   f"flow 2 joined ({len(moved)} in all); second half together against "
                   "unpinned on the plane: "
                   + ", ".join(f"{k} {_ratio(v)}" for k, v in shares.items()))


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
                   + ", ".join(f"{t} {g:.2f}" for t, g in at.items()))


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
    slack, rtt = m.row.params["slack"], m.fabric.spec.base_rtt_s
    per = {b["transport"]: {ph["message_bytes"]: ph["duration_s"] for ph in b["phases"]}
           for b in m.faulty.blocks}
    ok = bool(per["mrc"]) and m.faulty.block("mrc")["ok"]
    rows = []
    for size in sorted(per["mrc"]):
        best_t, best = min(((t, per[t].get(size) or float("inf")) for t in per if t != "mrc"),
                           key=lambda x: x[1])
        mine = per["mrc"][size]
        ok = ok and mine is not None and mine <= slack * best + rtt
        rows.append(f"{size / 1000:g} kB: mrc {mine:.2f} s, {best_t} {best:.2f} s")
    return Verdict(ok, {"phase_s": {t: {str(k): v for k, v in d.items()} for t, d in per.items()},
                        "curves": _curves(m)},
                   "; ".join(rows) or "no phases measured")


def victim(m: Measured) -> Verdict:
    """The victim's throughput while the incast ran against the same flow alone, for
    each transport; MRC's at least `share`, and not below any RoCE's by more than
    `margin`."""
    p = m.row.params
    figures = {}
    for block in m.faulty.blocks:
        alone = m.reference.block(block["transport"])["goodput_mbps"]
        under = (block.get("victim_throughput") or {}).get("during_incast_mbps")
        figures[block["transport"]] = round(under / alone, 4) if under and alone else None
    mrc = figures["mrc"]
    others = [v or 0.0 for t, v in figures.items() if t != "mrc"]
    passed = (mrc is not None and mrc >= p["share"]
              and all(mrc >= v - p.get("margin", 1.0) for v in others))
    return Verdict(passed, {"victim_share": figures},
                   "victim throughput during the incast against alone: "
                   + ", ".join(f"{t} {_ratio(v)}" for t, v in figures.items()))


def line_rate(m: Measured) -> Verdict:
    """MRC's goodput in the row's pass and in its reference against the most payload
    a host's ports carry."""
    ceiling = payload_rate_mbit(m.fabric, m.row.scenario.get("protocol", {}).get(
        "mtu_payload"))
    shares = {name: round(p.block("mrc")["goodput_mbps"] / ceiling, 4)
              for name, p in (("cross-T1", m.faulty), ("T0-local", m.reference))}
    passed = (m.faulty.block("mrc")["ok"] and m.reference.block("mrc")["ok"]
              and all(v >= m.row.params["share"] for v in shares.values()))
    return Verdict(passed, {"line_share": shares, "ceiling_mbps": round(ceiling, 3)},
                   f"mrc goodput against {ceiling:.2f} Mbit/s of payload: "
                   + ", ".join(f"{k} {_ratio(v)}" for k, v in shares.items())
                   + f" (at least {m.row.params['share']:.2f})")


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


def startup_losses(m: Measured) -> Verdict:
    """Packets lost per connection and per broken path it sprays over, with links down
    from the start: retransmissions whose original neither arrived after all
    (`duplicates`) nor was trimmed on a congested queue (`trimmed_rx`: its header
    arrived and was NACKed)."""
    limit = m.row.params["per_broken_path"]
    figures = {}
    for b in m.faulty.blocks:
        counters = b["agent_counters"]
        lost = max(0, counters.get("retransmits", 0) - counters.get("duplicates", 0)
                   - counters.get("trimmed_rx", 0))
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
    own flows' mean: MRC's flows even, and its slowest above the 1-QP RoCE's."""
    p = m.row.params
    ceiling = payload_rate_mbit(m.fabric)
    slowest, evenness = {}, {}
    for b in m.faulty.blocks:
        means = [f["mean_mbps"] or 0.0 for f in b["flow_throughput"]["flows"]]
        low = min(means, default=0.0)
        slowest[b["transport"]] = round(low / ceiling, 4)
        evenness[b["transport"]] = round(low / statistics.fmean(means), 4) if any(means) else 0.0
    mrc, base = slowest["mrc"], slowest.get(p["against"], 0.0)
    passed = (m.faulty.block("mrc")["ok"] and evenness["mrc"] >= p["even"]
              and mrc >= p["margin"] * base)
    return Verdict(passed, {"slowest_flow_share": slowest, "slowest_of_mean": evenness,
                            "ceiling_mbps": round(ceiling, 3)},
                   "slowest flow against the line rate's payload (and against the mean of "
                   "its transport's flows): " + ", ".join(
                       f"{t} {_ratio(v)} ({_ratio(evenness[t])})" for t, v in slowest.items()))


# The figures each judge decides on, by their path in its figures (a prefix takes every
# figure under it): paper.md gives their median and range over the repetitions.
DECIDING = {
    "slowdown_at_most": ("slowdown.mrc.slowdown",),
    "proportional": ("slowdown.mrc.goodput_ratio",),
    "plane_bound": ("slowdown.mrc.goodput_ratio",),
    "silent_t1": ("slowdown.mrc.goodput_ratio", "baseline_workload_s"),
    "steady_state": ("steady_ratio",),
    "gray_loss": ("detect_rtts", "slowdown.mrc.goodput_ratio"),
    "ecn_migration": ("first_migration_rtts", "shares"),
    "qp_order": ("at_largest",),
    "loss_ratio": ("goodput_ratio",),
    "sizes": ("phase_s.mrc",),
    "victim": ("victim_share",),
    "line_rate": ("line_share",),
    "transceiver": ("down_share", "after_share"),
    "startup_losses": ("lost.mrc.per_broken_path",),
    "permutation": ("slowest_of_mean.mrc", "slowest_flow_share"),
}

JUDGES = {f.__name__: f for f in (slowdown_at_most, proportional, plane_bound, silent_t1,
                                  steady_state, gray_loss, ecn_migration, qp_order,
                                  loss_ratio, sizes, victim, line_rate, transceiver,
                                  startup_losses, permutation)}
