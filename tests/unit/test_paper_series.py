"""`make paper`'s fault rows, as the paper ran them: one NIC pair on cluster-b, judged on
throughput in windows against the fault-free pass (experiments/analysis/timeseries.py,
experiments/paper/judge.py). Each judge is tried on synthetic time series just above and
just below its threshold, and where the run cannot show the claim (INCONCLUSIVE); the
rows' plan puts every row of Clusters A and B on cluster-b; docs/paper.md's tables of
criteria are the code's."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from experiments.analysis.timeseries import (
    paths_held,
    sends_by_path,
    span_mean,
    throughput,
    window_starts,
)
from experiments.paper.judge import JUDGES, Measured, Verdict, judge
from experiments.paper.replay import (
    checked_rows,
    combine,
    criteria_markdown,
    plan,
    row_plot,
    write_paper,
)
from experiments.paper.rows import (
    BAND,
    EV_COUNT,
    HELD,
    PROGRESS_S,
    SETTLE_RTTS,
    SHAPES,
    WIDE,
    WINDOW_FRAMES,
    WINDOW_SAMPLES,
    payload_rate_mbit,
    rows,
    window_rtts,
)
from experiments.run.play import Pass
from experiments.run.workload_run import TransportRun
from hosts.config import ProtocolConfig
from hosts.evset import EvSet
from hosts.protocol import ev_plane
from topologies.errors import UserError
from topologies.model import load_topology, with_rate_cap, without_delay
from topologies.paths import catalogue, choices_per_plane, shortest_choices

REPO = Path(__file__).resolve().parents[2]
DT = 0.05  # the agents' progress samples, as the runner takes them
RATE = 25.0  # Mbit/s a flow gets without faults, in these synthetic passes


@pytest.fixture(scope="module")
def fabric():
    """cluster-b at the rate one pair's links run at on a 2-core machine (the default
    budget shared by two sending hosts)."""
    return with_rate_cap(load_topology("cluster-b"), 7.0)


def row_of(fabric, key):
    (row,) = rows(fabric, lambda k: k == key)
    return row


def progress(t, dst, by_src):
    return {"t": t, "event": "progress", "host": dst, "rx_bytes": sum(by_src.values()),
            "rx_by_src": {str(k): v for k, v in by_src.items()}, "srtt_ms": 1.0}


def played(flows, rate, end, extra=(), ok=True, counters=None, starts=None):
    """A pass of MRC whose flows were each received at `rate(t, flow)` Mbit/s (constant
    over each sample interval), from their start (`starts`, default 0) to `end`."""
    flows = [tuple(f) for f in flows]
    starts = starts or {}
    events, totals = [], dict.fromkeys(flows, 0.0)
    for i in range(int(round(end / DT)) + 1):
        t = i * DT
        by_dst: dict[int, dict] = {}
        for s, d in flows:
            by_dst.setdefault(d, {})[s] = int(totals[(s, d)])
        events += [progress(t, d, by_src) for d, by_src in by_dst.items()]
        for f in flows:
            if t >= starts.get(f, 0.0):
                totals[f] += rate(t, f) * 1e6 / 8 * DT
    events = sorted(events + list(extra), key=lambda e: e["t"])
    block = {"transport": "mrc", "ok": ok, "workload_s": end, "goodput_mbps": RATE,
             "agent_counters": counters or {}}
    return Pass(runs=[TransportRun("mrc", 0.0, end=end)], events={"mrc": events},
                blocks=[block])


def flat(t, f):
    return RATE


def played_from(p, at, factor, events):
    """A pass of the row's flows (params `p`) at RATE, and `factor` of it from `at` on,
    with `events` beside the progress samples, past the row's judged time."""

    def rate(t, f):
        return RATE * (factor if t >= at else 1.0)

    return played(p["flows"], rate, p["horizon_s"] + 0.5, events)


def fault_free(row):
    """The row's flows at RATE throughout, past its judged time."""
    return played_from(row.params, 0.0, 1.0, ())


def judged(fabric, row, faulty, clean, faults=()):
    return JUDGES[row.judge](Measured(row, fabric, faulty, clean, [], faults))


# ---------------------------------------------------------------- the fabric and the rule
def test_a_cross_t1_pair_of_cluster_b_has_128_distinct_paths_and_a_t0_local_pair_8():
    cb = load_topology("cluster-b")
    assert (len(cb.hosts), cb.spec.planes, cb.spec.t1_per_plane, len(cb.switches)) == (
        4, 8, 16, 144)
    cross = catalogue(cb, 0, 3)
    assert len(cross) == len({(p.plane, p.spine) for p in cross}) == 128
    assert choices_per_plane(cb, 0, 3) == 16 and len(shortest_choices(cb, 0, 3)) == 16
    # A T0-local pair keeps to the direct path through its T0: one a plane.
    local = catalogue(cb, 0, 1)
    assert len(local) == 8 * 17 and shortest_choices(cb, 0, 1) == (0,)
    assert len({(p.plane, p.spine) for p in local if p.spine is None}) == 8
    # EV_COUNT EVs a connection are 16 a plane, each on a path of its own.
    config = ProtocolConfig(ev_count=EV_COUNT)
    assert config.evs_for(8) == 16
    evs = EvSet(8, 16, config.evs_for(8), random.Random(1))
    assert len({ev.key for ev in evs.rotation}) == 128


def test_a_window_is_the_fewest_round_trips_with_enough_frames_and_samples(fabric):
    def enough(spec, rtts):
        return (rtts * spec.bdp_frames * spec.planes >= WINDOW_FRAMES - 1e-6
                and rtts * spec.base_rtt_s >= WINDOW_SAMPLES * PROGRESS_S - 1e-9)

    for f in (fabric, with_rate_cap(load_topology("cluster-b"), 0.5)):
        w = window_rtts(f)
        assert enough(f.spec, w) and not enough(f.spec, w - 1)
    # About the paper's 200 ms at the calibrated rate.
    assert 0.15 < window_rtts(fabric) * fabric.spec.base_rtt_s < 0.3


def test_the_fault_rows_run_one_pair_on_cluster_b_with_128_evs(fabric):
    table = {c.row.key: c for c in checked_rows(fabric, None)}
    for key in ("nic-links-down", "transceiver-flap", "t0-down"):
        assert table[key].scenario.params["flows"] == [[0, 1], [1, 0]]  # T0-local
    for key in ("links-failing", "t0-t1-link-flaps", "t1-down", "silent-t1",
                "broken-at-start"):
        c = table[key]
        assert c.scenario.params["flows"] == [[0, 3], [3, 0]]  # cross-T1
        assert c.scenario.protocol["ev_count"] == EV_COUNT
        assert c.scenario.transports == ("mrc",)
        # One fault-free pass serves every cross-T1 row.
        assert c.reference.plan == table["links-failing"].reference.plan
    assert len({a.fault for a in table["links-failing"].scenario.faults}) == 20
    assert len(table["t0-t1-link-flaps"].scenario.faults) == 16  # eight down, eight up
    ev = table["ev-20pct-loss"]
    assert ev.scenario.protocol["ev_count"] == 8 and ev.scenario.protocol["packet_events"]
    # Two paths a plane: the denials leave T1 0 and 1, plane 0's T1 1 from window 2.
    denied = {(a.fault.plane, a.fault.spine) for a in ev.scenario.faults
              if a.fault.kind == "deny" and not a.up}
    assert len(denied) == 8 * 14 + 1 and (0, 1) in denied and (1, 1) not in denied
    assert [a.fault.kind for a in ev.reference.faults if not a.up].count("gray-loss") == 0
    ecn = table["ecn-migration"]
    assert ecn.scenario.params["start_s"][1] > 0 and len(ecn.scenario.params["flows"]) == 2
    assert ecn.reference.protocol["pin_path"] == [0, None]


# ---------------------------------------------------------------- the plan
def test_plain_make_paper_plays_every_row_of_clusters_a_and_b_on_cluster_b():
    legs = plan("2tier-8plane")
    assert [(leg.fabric.name, leg.active_hosts) for leg in legs] == [
        ("cluster-b", 2), ("cluster-d", 2), ("2tier-8plane", None)]
    every = rows(load_topology("2tier-8plane"))
    wide = {r.key for r in every if r.shape in WIDE and not r.loaded}
    assert legs[0].keys == wide and SHAPES["B"] == SHAPES["A"] == "cluster-b"
    # The appendix's one pair on Cluster D's plane, on its own fabric.
    own = {r.key for r in every if r.own_fabric}
    assert legs[1].keys == own == {"uplinks-failing-d", "uplinks-bottleneck-d",
                                   "uplinks-two-at-once-d"}
    assert legs[2].keys == {r.key for r in every
                            if r.shape not in WIDE and not r.own_fabric and not r.loaded}
    # The loaded variants only when asked for, on --topo.
    loaded = {r.key for r in every if r.loaded}
    assert loaded and all(k.endswith("-loaded") for k in loaded)
    assert plan("2tier-8plane", loaded=True)[2].keys == legs[2].keys | loaded
    assert [(leg.fabric.name, leg.keys) for leg in plan("2tier-8plane",
                                                         only={"t1-down-loaded"})] == [
        ("2tier-8plane", {"t1-down-loaded"})]


def test_shapes_one_and_paper_place_the_rows_as_they_say():
    (one,) = plan("2tier-2plane", "one")
    assert one.fabric.name == "2tier-2plane" and not any(k.endswith("-loaded")
                                                         for k in one.keys)
    paper = {leg.fabric.name: leg for leg in plan("2tier-8plane", "paper", loaded=True)}
    assert list(paper) == ["cluster-b", "cluster-c", "cluster-d", "2tier-8plane"]
    assert paper["cluster-c"].keys == {"ring-allreduce-qps", "ring-qp-scaling",
                                       "random-loss-0p1pct", "random-loss-1pct",
                                       "all-to-all-sizes", "all-to-all-loss-0p1pct",
                                       "all-to-all-loss-1pct"}
    assert paper["cluster-d"].keys == {"incast-victim", "incast-victim-pfc", "permutation",
                                       "uplinks-failing-d", "uplinks-bottleneck-d",
                                       "uplinks-two-at-once-d", "dcqcn-default-incast",
                                       "dcqcn-aggressive-incast",
                                       "dcqcn-most-aggressive-incast"}
    assert all(k.endswith("-loaded") for k in paper["2tier-8plane"].keys)
    # Only the chosen rows' fabrics are brought up; an unknown row is one line.
    assert [leg.fabric.name for leg in plan("2tier-8plane", "paper",
                                            only={"permutation"})] == ["cluster-d"]
    with pytest.raises(UserError, match="is not a row"):
        plan("2tier-8plane", only={"no-such-row"})


def test_docs_paper_md_lists_the_criteria_the_rows_have():
    text = (REPO / "docs/paper.md").read_text()
    blocks = re.findall(r"<!-- (\w+) table: generated.*?-->\n(.*?)\n<!-- end -->", text,
                        re.S)
    assert [name for name, _ in blocks] == ["criteria", "loaded"]
    paper, loaded = criteria_markdown()
    assert blocks[0][1] == paper
    assert blocks[1][1] == loaded


# ---------------------------------------------------------------- time series
def test_throughput_in_windows_follows_the_samples_and_says_where_they_are_missing():
    steady = played([(0, 3)], flat, 2.0)
    series = throughput(steady.events["mrc"], 0.0, 0.2, 2.0)
    assert [a for a, _ in series] == pytest.approx([0.2 * i for i in range(10)])
    assert all(v == pytest.approx(RATE, rel=1e-3) for _, v in series)
    assert span_mean(series, 0.2, 0.3, 1.0) == pytest.approx(RATE, rel=1e-3)  # 3 windows
    # Past the last sample of a destination: no value, and no mean over it.
    cut = throughput(steady.events["mrc"], 0.0, 0.2, 2.6)
    assert cut[-1][1] is None and span_mean(cut, 0.2, 0.0, 2.6) is None
    assert window_starts(0.2, 0.1, 0.9) == pytest.approx([0.2, 0.4, 0.6])


def test_sends_by_path_and_paths_held_follow_the_events():
    events = [{"t": t, "event": "send", "host": 0, "peer": 3, "ev": ev}
              for t, ev in ((0.05, 1), (0.15, 2), (0.25, 2), (0.35, 9))]
    events.append({"t": 0.1, "event": "send", "host": 3, "peer": 0, "ev": 1})
    assert sends_by_path(events, 0, 3, lambda ev: ev % 8, 0.0, 0.2, 0.4) == {
        1: [1, 1], 2: [1, 1]}
    moves = [{"t": 1.5, "event": "migrate", "host": 0, "peer": 3, "path": 0, "new_path": 5},
             {"t": 1.7, "event": "migrate", "host": 1, "peer": 2, "path": 0, "new_path": 4}]
    assert paths_held(moves, 0, 3, {0: 1}, 1.0) == [(0.0, {0: 1}), (0.5, {5: 1})]


# ---------------------------------------------------------------- held
def held_pass(row, factor, retired=True):
    """The pair's throughput at `factor` of fault-free from the row's first span on."""
    p = row.params
    start = p["spans"][0][1]

    def rate(t, f):
        return RATE * (factor if t >= start else 1.0)

    extra = [{"t": start + 0.01, "event": "retire", "host": 0, "peer": 3}] if retired else []
    return played(p["flows"], rate, p["horizon_s"] + 0.5, extra)


def test_held_throughput_passes_at_the_threshold_and_fails_below_it(fabric):
    row = row_of(fabric, "links-failing")
    clean = fault_free(row)
    above = judged(fabric, row, held_pass(row, HELD + 0.005), clean)
    assert above.outcome == "PASS" and set(above.figures["ratios"]) == {"failing", "after"}
    assert above.figures["ratios"]["failing"] == pytest.approx(HELD + 0.005, abs=1e-3)
    below = judged(fabric, row, held_pass(row, HELD - 0.005), clean)
    assert below.outcome == "FAIL" and "at least 0.95" in below.measured
    # No path retired: the links carried none of the pair's traffic.
    untouched = judged(fabric, row, held_pass(row, 1.0, retired=False), clean)
    assert untouched.outcome == "INCONCLUSIVE" and "retired" in untouched.inconclusive
    # A pass that stopped before the end of the judged time cannot show it either.
    short = played(row.params["flows"], flat, row.params["horizon_s"] / 2,
                   [{"t": 1.0, "event": "retire", "host": 0, "peer": 3}])
    assert judged(fabric, row, short, clean).outcome == "INCONCLUSIVE"


def glitch_pass(row, during, after, lost=(3, 2), errors=0):
    """The glitch row's flows at RATE, `during` of it while the links flap and `after`
    of it from the end of the flaps on; `lost`: packets each side sent again for a loss
    (the flapping host's, the remote sender's)."""
    p = row.params
    (_, a, b), _ = p["spans"]

    def rate(t, f):
        return RATE * (during if a <= t < b else after if t >= b else 1.0)

    out = played(p["flows"], rate, p["horizon_s"] + 0.5,
                 counters={"qp_errors": errors})
    out.runs[0].stats = {h: {"retransmits": 10 + n, "nacks": 10}
                         for h, n in zip((*p["flapping"], *p["remote"]), lost)}
    return out


def test_the_transceiver_glitch_holds_the_plane_s_share_and_recovers(fabric):
    row = row_of(fabric, "t0-transceiver-glitch")
    p, clean = row.params, fault_free(row)
    floor = 7 / 8 - BAND
    assert p["floor"] == pytest.approx(floor) and p["flapping"] == [0] and p["remote"] == [3]
    ok = judged(fabric, row, glitch_pass(row, floor + 0.01, HELD + 0.01), clean)
    assert ok.outcome == "PASS", ok.measured
    assert ok.figures["lost"] == {"h0": 3, "h3": 2}
    assert judged(fabric, row, glitch_pass(row, floor - 0.01, 1.0), clean).outcome == "FAIL"
    assert judged(fabric, row, glitch_pass(row, 1.0, HELD - 0.01), clean).outcome == "FAIL"
    assert judged(fabric, row, glitch_pass(row, 1.0, 1.0, errors=1), clean).outcome == "FAIL"
    # The remote sender lost nothing: the flaps met none of its packets.
    quiet = judged(fabric, row, glitch_pass(row, 1.0, 1.0, lost=(3, 0)), clean)
    assert quiet.outcome == "INCONCLUSIVE" and "h3 lost no packet" in quiet.inconclusive


def test_a_fault_free_pass_that_retired_a_path_makes_the_row_inconclusive(fabric):
    # The row is judged against its fault-free pass: one that retired paths (the
    # machine fell behind, no fault) is not the reference the claim needs.
    for key in ("links-failing", "ev-20pct-loss"):  # the latter: denials, no fault
        row = row_of(fabric, key)
        assert row.fault_free_reference
    row = row_of(fabric, "links-failing")
    flows, end = row.params["flows"], row.params["horizon_s"] + 0.5
    clean = played(flows, flat, end)
    faulty = held_pass(row, 1.0)
    ok = judge(Measured(row, fabric, faulty, clean, [], ()))
    assert ok.outcome == "PASS" and ok.figures["fault_free_retired"] == 0
    assert "the fault-free pass retired 0 paths" in ok.measured
    damaged = played(flows, flat, end, [{"t": 0.2, "event": "retire", "host": 0, "peer": 3},
                                         {"t": 0.2, "event": "retire", "host": 3, "peer": 0}])
    bad = judge(Measured(row, fabric, faulty, damaged, [], ()))
    assert bad.outcome == "INCONCLUSIVE" and bad.figures["fault_free_retired"] == 2
    assert "fault-free pass retired 2 paths" in bad.inconclusive
    # A row measured against another run (a fabric without the fault's cause) is not held
    # to it.
    assert not row_of(fabric, "startup-losses").fault_free_reference


def test_no_steady_state_degradation_allows_the_settling_round_trips(fabric):
    row = row_of(fabric, "t1-down")
    rtt = fabric.spec.base_rtt_s
    failure = row.scenario["faults"][0]["at_s"]
    clean = fault_free(row)

    def dip(rtts):
        def rate(t, f):
            return 0.0 if failure <= t < failure + rtts * rtt else RATE * 0.97
        extra = [{"t": failure + 0.01, "event": "retire", "host": 0, "peer": 3}]
        return played(row.params["flows"], rate, row.params["horizon_s"] + 0.5, extra)

    assert judged(fabric, row, dip(SETTLE_RTTS - 10), clean).outcome == "PASS"
    # Twenty round trips more of nothing fall in the judged time: a window lost.
    assert judged(fabric, row, dip(SETTLE_RTTS + 20), clean).outcome == "FAIL"


# ---------------------------------------------------------------- capacity
def capacity_pass(row, factor, dip_rtts, rtt, end_extra=0.5):
    levels = row.params["levels"]

    def rate(t, f):
        for a, b, share, _ in levels:
            if a <= t < b:
                return 0.0 if t < a + dip_rtts * rtt else RATE * share * factor
        return RATE

    return played(row.params["flows"], rate, row.params["horizon_s"] + end_extra)


def test_proportional_throughput_is_within_the_band_of_the_remaining_capacity(fabric):
    row = row_of(fabric, "nic-links-down")
    rtt = fabric.spec.base_rtt_s
    shares = [share for _, _, share, _ in row.params["levels"]]
    assert shares == [7 / 8, 6 / 8, 5 / 8, 4 / 8, 5 / 8, 6 / 8, 7 / 8, 1.0]
    # A level from each step of the faults (links down in turn, back in reverse order).
    faults = sorted(row.scenario["faults"], key=lambda f: f["at_s"])
    steps = [f["at_s"] for f in faults] + [f["at_s"] + f["down_s"] for f in faults[::-1]]
    assert [a for a, _, _, _ in row.params["levels"]] == pytest.approx(steps, abs=1e-3)
    clean = fault_free(row)
    ok = judged(fabric, row, capacity_pass(row, 1 - BAND + 0.01, 10, rtt), clean)
    assert ok.outcome == "PASS", ok.measured
    assert len(ok.figures["levels"]) == len(shares)  # one figure a step
    assert all(v == pytest.approx(1 - BAND + 0.01, abs=0.005)
               for v in ok.figures["levels"].values())
    assert max(ok.figures["back_rtts"].values()) <= SETTLE_RTTS
    low = judged(fabric, row, capacity_pass(row, 1 - BAND - 0.01, 10, rtt), clean)
    assert low.outcome == "FAIL"
    # Above the line by more than the band is not "proportional" either.
    high = judged(fabric, row, capacity_pass(row, 1 + BAND + 0.01, 10, rtt), clean)
    assert high.outcome == "FAIL"
    assert judged(fabric, row, capacity_pass(row, 1 + BAND - 0.01, 10, rtt),
                  clean).outcome == "PASS"
    # An interruption longer than the allowance is not brief.
    slow = judged(fabric, row, capacity_pass(row, 1.0, SETTLE_RTTS + 30, rtt), clean)
    assert slow.outcome == "FAIL" and "back in" in slow.measured


def test_a_return_is_read_to_a_round_trip_when_a_window_is_longer_than_the_allowance():
    # cluster-b at its own 10 Mbit/s with no delay emulated (a kernel without netem):
    # a window is 45 round trips, more than the 40 a return may take, so whole windows
    # could only say "back at once" or "back after 45".
    fast = without_delay(load_topology("cluster-b"))
    assert window_rtts(fast) > SETTLE_RTTS
    row = row_of(fast, "transceiver-flap")
    rtt, clean = fast.spec.base_rtt_s, fault_free(row)
    # What the reading may be off by: a window is at the line once 95% of it is (up to
    # BAND of a window early), and a return is known to a progress sample (DT).
    slack = BAND * window_rtts(fast) + DT / rtt
    for dip in (SETTLE_RTTS - slack - 1, SETTLE_RTTS + slack + 1):
        verdict = judged(fast, row, capacity_pass(row, 1.0, dip, rtt), clean)
        assert verdict.outcome == ("PASS" if dip < SETTLE_RTTS else "FAIL"), verdict.measured
        assert all(dip - slack <= v <= dip + slack for v in verdict.figures["back_rtts"].values())


def test_nothing_left_to_be_proportional_to_is_inconclusive():
    one = load_topology("2tier-1plane")
    row = row_of(one, "t0-down")
    assert row.params["levels"][0][2] == 0  # one plane: its T0 was all there was
    clean = fault_free(row)
    verdict = judged(one, row, capacity_pass(row, 1.0, 0, one.spec.base_rtt_s), clean)
    assert verdict.outcome == "INCONCLUSIVE" and "no capacity left" in verdict.inconclusive


# ---------------------------------------------------------------- point to point
def test_point_to_point_needs_both_placements_at_the_threshold_of_the_payload_rate(fabric):
    row = row_of(fabric, "point-to-point")
    ceiling = payload_rate_mbit(fabric)
    end = row.params["horizon_s"] + 0.5

    def one_way(flow, share):
        return played([flow], lambda t, f: share * ceiling, end)

    cross, local = row.params["cross"], row.params["local"]
    ok = judged(fabric, row, one_way(cross, HELD + 0.01), one_way(local, HELD + 0.01))
    assert ok.outcome == "PASS"
    assert ok.figures["line_share"]["T0-local"] == pytest.approx(HELD + 0.01, abs=1e-3)
    assert judged(fabric, row, one_way(cross, HELD + 0.01),
                  one_way(local, HELD - 0.01)).outcome == "FAIL"
    empty = Pass(runs=[TransportRun("mrc", 0.0, end=end)], events={"mrc": []},
                 blocks=[{"transport": "mrc", "ok": True}])
    assert judged(fabric, row, one_way(cross, 1.0), empty).outcome == "INCONCLUSIVE"


# ---------------------------------------------------------------- the lossy EV
def ev_pass(fabric, row, retire_after=0.03, reinstate=False, a_before=True, factor=0.97,
            tail_resend=False):
    """The lossy connection's packets: EV-A every 20 ms (acked on it 10 ms later) until
    the loss, then one lost there and resent on EV-B, EV-A retired `retire_after` s
    after that packet, EV-B every 20 ms from then on. With `tail_resend`, a packet of
    EV-A half way to the loss is also resent on plane 1, whose ack comes first (a tail
    probe's resend)."""
    p = row.params
    plane0 = [x for x in catalogue(fabric, p["src"], p["dst"]) if x.plane == 0]
    ev_a = next(x.ev for x in plane0 if x.spine == p["spine_a"])
    ev_b = next(x.ev for x in plane0 if x.spine == p["spine_b"])
    src, dst, loss = p["src"], p["dst"], p["loss_s"]
    events, psn, t = [], 0, 0.01
    while t < loss:
        if a_before:
            events += [{"t": t, "event": "send", "host": src, "peer": dst, "ev": ev_a,
                        "psn": psn},
                       {"t": t + 0.01, "event": "ack", "host": src, "peer": dst, "ev": ev_a,
                        "psn": psn}]
        psn, t = psn + 1, t + 0.02
    if tail_resend:
        elsewhere = next(x.ev for x in catalogue(fabric, src, dst) if x.plane == 1)
        early = next(e for e in events if e["event"] == "send" and e["t"] >= loss / 2)
        # The sender logs the first ack of a packet only: the resend's.
        events = [e for e in events if not (e["event"] == "ack" and e["psn"] == early["psn"])]
        events += [{**early, "t": early["t"] + 0.002, "ev": elsewhere, "retransmit": True},
                   {**early, "t": early["t"] + 0.005, "event": "ack", "ev": elsewhere}]
    lost_at, retired = loss + 0.01, loss + 0.01 + retire_after
    events += [{"t": lost_at, "event": "send", "host": src, "peer": dst, "ev": ev_a,
                "psn": psn},
               {"t": retired, "event": "retire", "host": src, "peer": dst, "plane": 0,
                "path": 0, "ev": ev_a},
               {"t": retired + 0.001, "event": "send", "host": src, "peer": dst, "ev": ev_b,
                "psn": psn, "retransmit": True},
               {"t": retired + 0.011, "event": "ack", "host": src, "peer": dst, "ev": ev_b,
                "psn": psn}]
    t = retired + 0.02
    while t < p["horizon_s"] + 0.5:
        psn += 1
        events.append({"t": t, "event": "send", "host": src, "peer": dst, "ev": ev_b,
                       "psn": psn})
        t += 0.02
    if reinstate:
        events.append({"t": retired + 1.0, "event": "reinstate", "host": src, "peer": dst,
                       "plane": 0, "path": 0, "ev": ev_a})
    return played_from(p, loss, factor, events)


def test_the_lossy_ev_goes_at_once_stays_out_and_its_backup_takes_its_place(fabric):
    row = row_of(fabric, "ev-20pct-loss")
    clean = fault_free(row)
    ok = judged(fabric, row, ev_pass(fabric, row), clean)
    assert ok.outcome == "PASS", ok.measured
    rtt = fabric.spec.base_rtt_s
    assert ok.figures["retire_rtts"] == pytest.approx(0.03 / rtt, abs=0.01)
    assert ok.figures["ev_a_sends_after"] == 0 and ok.figures["ev_b_every_window"]
    activity = ok.figures["activity"]
    assert set(activity) == {"windows", "EV-A (plane 0, T1 0)", "EV-B (plane 0, T1 1)"}
    # Not at once: more than the round trips allowed after the first lost packet.
    late = judged(fabric, row, ev_pass(fabric, row, retire_after=12 * rtt), clean)
    assert late.outcome == "FAIL" and late.figures["retire_rtts"] > 10
    assert judged(fabric, row, ev_pass(fabric, row, retire_after=9 * rtt),
                  clean).outcome == "PASS"
    # Back in use while it still drops.
    assert judged(fabric, row, ev_pass(fabric, row, reinstate=True), clean).outcome == "FAIL"
    assert judged(fabric, row, ev_pass(fabric, row, factor=HELD - 0.01),
                  clean).outcome == "FAIL"
    # A packet of EV-A answered on EV-B before the loss began was not lost to it.
    resent = judged(fabric, row, ev_pass(fabric, row, tail_resend=True), clean)
    assert resent.outcome == "PASS", resent.measured
    assert resent.figures["retire_rtts"] == ok.figures["retire_rtts"]
    idle = judged(fabric, row, ev_pass(fabric, row, a_before=False), clean)
    assert idle.outcome == "INCONCLUSIVE" and "not the active EV" in idle.inconclusive


# ---------------------------------------------------------------- a lossy NIC link
def lossy_pass(fabric, row, returns=True, again=True, sent_after=False, denied=(0, 3),
               factor=0.875, retired=True, again_path=0):
    """The lossy plane's events: a path of it retired, reinstated, retired again before
    the entry; the entry applied by `denied` hosts; throughput `factor` of fault-free
    from the entry on."""
    p = row.params
    paths = catalogue(fabric, 0, 3)
    lossy = next(x.ev for x in paths if x.plane == p["plane"])
    other = next(x.ev for x in paths if x.plane != p["plane"])
    loss, entry = p["loss_s"], p["entry_s"]

    def at(t, event, host, ev=lossy, path=0):
        return {"t": t, "event": event, "host": host, "peer": 3 - host, "ev": ev,
                "plane": ev_plane(ev), "path": path}

    events = [at(loss - 0.1, "send", 0), at(loss + 0.05, "send", 0)]
    events += [at(loss + 0.1, "retire", 0)] if retired else []
    events += [at(loss + 0.5, "reinstate", 0), at(loss + 0.6, "send", 0)] if returns else []
    events += [at(loss + 0.7, "retire", 0, path=again_path)] if again else []
    events += [at(entry + 0.002, "deny", host) for host in denied]
    events += [at(entry + 0.01, "send", host, other) for host in (0, 3)]
    events += [at(entry + 0.5, "send", 3)] if sent_after else []
    return played_from(p, entry, factor, events)


def test_a_lossy_nic_link_keeps_its_plane_in_use_until_a_denylist_entry(fabric):
    row = row_of(fabric, "lossy-nic-link")
    clean = fault_free(row)
    ok = judged(fabric, row, lossy_pass(fabric, row), clean)
    assert ok.outcome == "PASS", ok.measured
    assert ok.figures["returns"] == 1 and ok.figures["retired_again"] == 1
    assert ok.figures["level"] == pytest.approx(1.0, abs=0.01)
    # MRC kept the plane out by itself: not the paper's claim.
    assert judged(fabric, row, lossy_pass(fabric, row, returns=False, again=False),
                  clean).outcome == "FAIL"
    assert judged(fabric, row, lossy_pass(fabric, row, again=False), clean).outcome == "FAIL"
    # Another path retired after one came back is not the path coming back to lose again.
    assert judged(fabric, row, lossy_pass(fabric, row, again_path=1),
                  clean).outcome == "FAIL"
    # The entry did not avoid the plane: a packet on it after, or a host never applied it.
    assert judged(fabric, row, lossy_pass(fabric, row, sent_after=True),
                  clean).outcome == "FAIL"
    assert judged(fabric, row, lossy_pass(fabric, row, denied=(0,)), clean).outcome == "FAIL"
    # The remaining-capacity line, just inside and just outside the band.
    share = row.params["share"]
    assert judged(fabric, row, lossy_pass(fabric, row, factor=share * (1 - BAND + 0.01)),
                  clean).outcome == "PASS"
    assert judged(fabric, row, lossy_pass(fabric, row, factor=share * (1 - BAND - 0.01)),
                  clean).outcome == "FAIL"
    untouched = judged(fabric, row, lossy_pass(fabric, row, retired=False, returns=False,
                                               again=False), clean)
    assert untouched.outcome == "INCONCLUSIVE" and "touched none" in untouched.inconclusive


# ---------------------------------------------------------------- ECN migration
def ecn_pass(fabric, row, moves=(), factor=0.97, echoes=20):
    p = row.params
    one, two = (tuple(f) for f in p["flows"])
    events = [{"t": p["join_s"] + rtts * fabric.spec.base_rtt_s, "event": "migrate",
               "host": flow[0], "peer": flow[1], "path": a, "new_path": b}
              for rtts, flow, a, b in moves]

    def rate(t, f):
        return RATE * (factor if t >= p["join_s"] else 1.0)

    return played(p["flows"], rate, p["horizon_s"] + 0.5, events,
                  counters={"ecn_echoes": echoes}, starts={two: p["join_s"]})


def test_ecn_moves_a_flow_off_the_shared_ev_within_the_round_trips_and_keeps_both_up(fabric):
    row = row_of(fabric, "ecn-migration")
    one, two = (tuple(f) for f in row.params["flows"])
    clean = ecn_pass(fabric, row, factor=1.0, echoes=0)
    ok = judged(fabric, row, ecn_pass(fabric, row, [(3, one, 0, 5)]), clean)
    assert ok.outcome == "PASS", ok.measured
    assert ok.figures["first_migration_rtts"] == pytest.approx(3, abs=0.01)
    assert all(s == pytest.approx(0.97, abs=0.005) for s in ok.figures["shares"].values())
    assert judged(fabric, row, ecn_pass(fabric, row, [(11, one, 0, 5)]),
                  clean).outcome == "FAIL"
    # The second flow follows the first onto its new path: they share one again.
    again = judged(fabric, row, ecn_pass(fabric, row, [(3, one, 0, 5), (20, two, 0, 5)]),
                   clean)
    assert again.outcome == "FAIL" and again.figures["shared_at_s"]
    assert judged(fabric, row, ecn_pass(fabric, row, [(3, one, 0, 5)], factor=HELD - 0.01),
                  clean).outcome == "FAIL"
    # Nothing moved: a finding when marks came, no test of the claim when none did.
    assert judged(fabric, row, ecn_pass(fabric, row), clean).outcome == "FAIL"
    unmarked = judged(fabric, row, ecn_pass(fabric, row, echoes=0), clean)
    assert unmarked.outcome == "INCONCLUSIVE" and "no ECN mark" in unmarked.inconclusive


# ---------------------------------------------------------------- start-up losses
def test_startup_losses_are_fewer_than_five_a_connection(fabric):
    (checked,) = checked_rows(fabric, {"startup-losses"})

    def verdict(lost, faults=checked.scenario.faults):
        block = {"transport": "mrc", "ok": True, "agent_counters": {
            "retransmits": lost + 3, "duplicates": 3, "trimmed_rx": 0},
            "flow_throughput": {"flows": [{"src": 0, "dst": 3}, {"src": 3, "dst": 0}]}}
        return JUDGES["lost_per_connection"](Measured(checked.row, fabric,
                                                      Pass(blocks=[block]), None, [], faults))

    ok = verdict(9)
    assert ok.outcome == "PASS" and ok.figures["lost"] == {
        "packets": 9, "connections": 2, "per_connection": 4.5, "broken_paths": 4}
    assert verdict(10).outcome == "FAIL"  # 5 a connection: not fewer than 5
    assert verdict(0, faults=()).outcome == "INCONCLUSIVE"


# ---------------------------------------------------------------- verdicts and paper.md
def test_a_repetition_that_cannot_show_the_claim_makes_the_row_inconclusive():
    ok = Verdict(True, {"ratios": {"after": 0.99}}, "after 0.99")
    blind = Verdict(False, {"ratios": {"after": 1.0}}, "INCONCLUSIVE: nothing retired",
                    "nothing retired")
    mixed = combine([ok, blind, ok], 0, ("ratios",))
    assert mixed["verdict"] == "INCONCLUSIVE" and mixed["outcomes"] == [
        "PASS", "INCONCLUSIVE", "PASS"]
    assert "another run INCONCLUSIVE: nothing retired" in mixed["measured"]
    assert combine([blind, blind], 1)["verdict"] == "INCONCLUSIVE"


def test_paper_md_puts_the_loaded_variants_in_a_table_of_their_own(tmp_path):
    meta = {"topology": "2tier-8plane", "dataplane": "kernel", "started_at": "now",
            "duration_s": 1.0, "cores": 2, "link_rate_mbit": 1.25, "link_rate_reason": "x",
            "hosts": 8, "planes": 8, "t1_per_plane": 4, "link_emulation": {}}
    results = [{"key": k, "section": "5", "claim": "c", "criterion": "k", "measured": "m",
                "verdict": "PASS", "differs": "d", "loaded": k.endswith("-loaded")}
               for k in ("t1-down", "t1-down-loaded")]
    write_paper(tmp_path, meta, results)
    text = (tmp_path / "paper.md").read_text()
    main, loaded = text.split("## On a loaded fabric")
    assert "| t1-down (5) |" in main and "t1-down-loaded" not in main.split("## t1-down")[0]
    assert "not the paper's claim" in loaded.split("| variant")[0]
    assert "| t1-down-loaded (5) |" in loaded


@pytest.mark.parametrize("key", ["links-failing", "nic-links-down", "point-to-point",
                                 "ev-20pct-loss", "ecn-migration"])
def test_each_fault_row_draws_its_figure(fabric, tmp_path, key):
    row = row_of(fabric, key)
    p = row.params
    if key == "ev-20pct-loss":
        faulty = ev_pass(fabric, row)
        clean = fault_free(row)
    elif key == "ecn-migration":
        one = tuple(p["flows"][0])
        faulty = ecn_pass(fabric, row, [(3, one, 0, 5)])
        clean = ecn_pass(fabric, row, factor=1.0)
    elif key == "point-to-point":
        faulty = played([p["cross"]], flat, p["horizon_s"] + 0.5)
        clean = played([p["local"]], flat, p["horizon_s"] + 0.5)
    elif key == "nic-links-down":
        faulty = capacity_pass(row, 1.0, 10, fabric.spec.base_rtt_s)
        clean = fault_free(row)
    else:
        faulty = held_pass(row, 0.99)
        clean = fault_free(row)
    faulty.runs[0].faults = [{"t": 1.0, "up": False, "fault": "link-down"},
                             {"t": 0.0, "up": False, "fault": "deny"}]
    verdict = judged(fabric, row, faulty, clean)
    path = tmp_path / f"{key}.png"
    row_plot(path, row, faulty, verdict.figures)
    assert path.stat().st_size > 10_000
