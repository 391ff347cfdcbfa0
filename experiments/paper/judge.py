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
from experiments.paper.rows import BASELINE, Row
from experiments.run.play import Pass
from hosts.protocol import ev_plane
from topologies.model import Fabric
from topologies.paths import catalogue, path_index


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


def plane_bound(m: Measured) -> Verdict:
    """Goodput against fault-free at least the capacity left in the plane that lost
    most uplinks at one T0: MRC loads its planes equally (the paper's section 4), so
    that plane sets the pace of every flow through it."""
    lost = worst_plane_loss(m.fabric, m.faults)
    floor = 1 - lost - m.row.params["slack"]
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
    """MRC within its limit; the baseline finished only after the T1 came back."""
    verdict = slowdown_at_most(m)
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
    """MRC's goodput from `settle_s` after the failure on, against its fault-free run."""
    settle, limit = m.row.params["settle_s"], m.row.params["limit"]
    down = min((t for t, up in m.fault_times if not up), default=0.0)
    run, ref = m.faulty.run("mrc"), m.reference.run("mrc")
    after = _mean_goodput(m.faulty.events["mrc"], run.start, down + settle, run.end - run.start)
    clean = _mean_goodput(m.reference.events["mrc"], ref.start, 0.0, ref.end - ref.start)
    ratio = after / clean if after is not None and clean else None
    finished = m.faulty.block("mrc")["ok"]
    passed = finished and ratio is not None and ratio >= limit
    entries = _slowdowns(m)
    return Verdict(passed, {"steady_ratio": ratio, "slowdown": entries},
                   f"mrc goodput from {down + settle:.1f} s on: {_ratio(ratio)} of fault-free "
                   f"(at least {limit:.2f}); slowdown: mrc {_pct(entries['mrc']['slowdown'])}; "
                   + _others(m, entries, "slowdown", _pct))


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
    # An RTT is never shorter than the path's round trip with empty queues as counted
    # (serialization at every hop): an emulated hop with nothing queued forwards at
    # once, so before the loss the measured one can be a hundredth of it
    # (docs/similarity.md "An idle hop forwards at once").
    counted_ms = m.fabric.spec.base_rtt_s * 1000
    rtt_ms = max(recovery["rtt_median_ms"] or 0.0, counted_ms) if recovery else None
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


def _rtt_s(events: list[dict]) -> float | None:
    values = [e["srtt_ms"] / 1000 for e in events
              if e.get("event") == "progress" and e.get("srtt_ms")]
    return statistics.median(values) if values else None


def ecn_migration(m: Measured) -> Verdict:
    p = m.row.params
    events = m.faulty.events["mrc"]
    run, ref = m.faulty.run("mrc"), m.reference.run("mrc")
    moved = [e["t"] - run.start for e in events if e.get("event") == "migrate"]
    rtt = _rtt_s(events)
    first = min(moved) / rtt if moved and rtt else None
    middle = (run.start + run.end) / 2
    shares = {}
    for t in run.transfers:
        pinned = flow_mbps(events, t.src, t.dst, middle, run.end)
        alone = flow_mbps(m.reference.events["mrc"], t.src, t.dst, ref.start, ref.end)
        shares[f"h{t.src}->h{t.dst}"] = pinned / alone if pinned is not None and alone else None
    passed = (first is not None and first <= p["rtts"]
              and all(s is not None and s >= p["share"] for s in shares.values()))
    return Verdict(passed, {"first_migration_rtts": first, "migrations": len(moved),
                            "shares": shares},
                   f"first migration after {'n/a' if first is None else f'{first:.1f}'} RTT "
                   f"({len(moved)} in all); second-half throughput against unpinned: "
                   + ", ".join(f"{k} {_ratio(v)}" for k, v in shares.items()))


def qp_order(m: Measured) -> Verdict:
    slack = m.row.params["slack"]
    goodput = {b["transport"]: b["goodput_mbps"] for b in m.faulty.blocks}
    # A baseline that did not finish still has its goodput: what it delivered in time.
    passed = (m.faulty.block("mrc")["ok"] and goodput["mrc"] >= slack * goodput["roce-16"] > 0
              and goodput["roce-16"] > goodput["roce"])
    return Verdict(passed, {"goodput_mbps": goodput},
                   "goodput (Mbit/s): " + ", ".join(f"{t} {g:.1f}" for t, g in goodput.items()))


def loss_ratio(m: Measured) -> Verdict:
    p = m.row.params
    entries = _slowdowns(m)
    mrc = entries["mrc"]["goodput_ratio"]
    passed = mrc is not None and mrc >= p["mrc"]
    if "baseline" in p:
        base = entries[p["baseline"]]["goodput_ratio"]
        passed = passed and base is not None and base <= p["baseline_factor"] * mrc
    return Verdict(passed, {"goodput_ratio": {t: e["goodput_ratio"] for t, e in entries.items()},
                            "slowdown": entries},
                   f"goodput against loss-free: mrc {_ratio(mrc)} (at least {p['mrc']:.2f}); "
                   + _others(m, entries, "goodput_ratio", _ratio))


def sizes(m: Measured) -> Verdict:
    """MRC's time for each size's phase against the best baseline's; a baseline phase
    that delivered nothing in time counts as endless."""
    slack = m.row.params["slack"]
    per = {b["transport"]: {ph["message_bytes"]: ph["duration_s"] for ph in b["phases"]}
           for b in m.faulty.blocks}
    ok = bool(per["mrc"]) and m.faulty.block("mrc")["ok"]
    rows = []
    for size in sorted(per["mrc"]):
        best_t, best = min(((t, per[t].get(size) or float("inf")) for t in per if t != "mrc"),
                           key=lambda x: x[1])
        mine = per["mrc"][size]
        ok = ok and mine is not None and mine <= slack * best
        rows.append(f"{size / 1000:g} kB: mrc {mine:.2f} s, {best_t} {best:.2f} s")
    return Verdict(ok, {"phase_s": {t: {str(k): v for k, v in d.items()} for t, d in per.items()}},
                   "; ".join(rows) or "no phases measured")


def victim(m: Measured) -> Verdict:
    """The victim's throughput while the incast ran against the same flow alone."""
    share = m.row.params["share"]
    figures = {}
    for block in m.faulty.blocks:
        alone = m.reference.block(block["transport"])["goodput_mbps"]
        under = (block.get("victim_throughput") or {}).get("during_incast_mbps")
        figures[block["transport"]] = round(under / alone, 4) if under and alone else None
    mrc = figures["mrc"]
    passed = mrc is not None and mrc >= share
    return Verdict(passed, {"victim_share": figures},
                   "victim throughput during the incast against alone: "
                   + ", ".join(f"{t} {_ratio(v)}" for t, v in figures.items()))


JUDGES = {f.__name__: f for f in (slowdown_at_most, proportional, plane_bound, silent_t1,
                                  steady_state,
                                  gray_loss, ecn_migration, qp_order, loss_ratio, sizes,
                                  victim)}
