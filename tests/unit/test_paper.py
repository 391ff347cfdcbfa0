"""`make paper`: its rows are valid scenarios on the shipped topologies, its judges decide
by their stated criteria, and paper.md has every row with its verdict."""

from __future__ import annotations

import json

import pytest

from experiments.paper.judge import JUDGES, Measured
from experiments.paper.replay import FEATURES, checked_rows, main, write_paper
from experiments.paper.rows import BASELINE, rows
from experiments.run.calibration import DEFAULT_MBIT_PER_CORE, cap_for
from experiments.run.play import Pass
from topologies.model import load_topology, with_rate_cap


@pytest.mark.parametrize("topology", ["2tier-8plane", "2tier-2plane", "2tier-1plane"])
def test_every_row_is_a_valid_scenario_on_the_shipped_topologies(topology):
    fabric = load_topology(topology)
    fabric = with_rate_cap(fabric, cap_for(fabric, DEFAULT_MBIT_PER_CORE, cores=2))
    table = checked_rows(fabric, None)
    keys = [checked.row.key for checked in table]
    assert len(keys) == len(set(keys)) >= 14
    # A NIC port loss means nothing where NICs have a single port.
    assert [c.row.key for c in table if c.not_applicable] == (
        ["nic-port-loss"] if fabric.spec.planes == 1 else [])
    for checked in table:
        row, scenario, reference = checked.row, checked.scenario, checked.reference
        if checked.not_applicable:
            continue
        assert row.judge in JUDGES and set(row.needs) <= set(FEATURES)
        assert "mrc" in scenario.transports and scenario.plan
        if row.reference == "fault-free":
            assert reference.transports == scenario.transports and not reference.faults
            assert reference.plan == scenario.plan


def test_the_agents_budget_caps_the_links():
    eight = load_topology("2tier-8plane")
    assert cap_for(eight, 80, cores=2) == 2.5  # 8 hosts x 8 planes share 160 Mbit/s
    capped = with_rate_cap(eight, 2.5)
    assert capped.spec.host_t0.rate_mbit == capped.spec.t0_t1.rate_mbit == 2.5
    two = load_topology("2tier-2plane")
    assert with_rate_cap(two, cap_for(two, 80, cores=2)) is two  # 20 Mbit/s is within it


def block(transport, seconds, ok=True, nbytes=1_000_000, **extra):
    return {"transport": transport, "ok": ok, "workload_s": seconds,
            "goodput_mbps": nbytes * 8 / seconds / 1e6, **extra}


def measured(key, faulty, clean=None, times=()):
    fabric = load_topology("2tier-8plane")
    (row,) = rows(fabric, lambda k: k == key)
    ref = None if clean is None else Pass(blocks=clean)
    return Measured(row, fabric, Pass(blocks=faulty), ref, list(times))


def test_slowdown_rows_pass_within_the_limit_and_fail_beyond_it():
    clean = [block("mrc", 2.0), block(BASELINE, 3.0)]
    ok = JUDGES["slowdown_at_most"](measured("t0-t1-link-flaps",
                                            [block("mrc", 2.08), block(BASELINE, 9.0)], clean))
    assert ok.passed and "mrc +4.0% (limit 5%)" in ok.measured and "+200.0%" in ok.measured
    slow = JUDGES["slowdown_at_most"](measured("t0-t1-link-flaps",
                                              [block("mrc", 2.2), block(BASELINE, 3.0)], clean))
    assert not slow.passed
    unfinished = JUDGES["slowdown_at_most"](measured(
        "t0-t1-link-flaps", [block("mrc", 2.0, ok=False), block(BASELINE, 3.0)], clean))
    assert not unfinished.passed


def test_a_silent_t1_row_needs_the_baseline_to_wait_for_the_reboot():
    clean = [block("mrc", 2.0), block(BASELINE, 3.0)]
    times = [(0.6, False), (2.1, True)]
    stalled = JUDGES["silent_t1"](measured("silent-t1", [block("mrc", 2.1),
                                                         block(BASELINE, 4.0)], clean, times))
    assert stalled.passed and "the T1 came back at 2.10 s" in stalled.measured
    # A baseline that finished before the T1 came back never stalled on it.
    early = JUDGES["silent_t1"](measured("silent-t1", [block("mrc", 2.1),
                                                       block(BASELINE, 2.0)], clean, times))
    assert not early.passed


def test_loss_rows_compare_each_transport_with_its_loss_free_run():
    clean = [block("mrc", 2.0), block("roce-16", 2.5), block("roce", 8.0)]
    ok = JUDGES["loss_ratio"](measured("random-loss-1pct", [
        block("mrc", 6.0), block("roce-16", 20.0), block("roce", 80.0, ok=False)], clean))
    assert ok.passed  # mrc keeps 1/3; roce keeps 1/10, below half of mrc's
    baseline_close = JUDGES["loss_ratio"](measured("random-loss-1pct", [
        block("mrc", 6.0), block("roce-16", 20.0), block("roce", 16.0)], clean))
    assert not baseline_close.passed  # roce keeps 1/2: not "far below"


def test_the_ring_row_orders_mrc_roce16_and_roce():
    row = "ring-allreduce-qps"
    assert JUDGES["qp_order"](measured(row, [block("mrc", 2.0), block("roce-16", 2.05),
                                             block("roce", 5.0)])).passed
    assert not JUDGES["qp_order"](measured(row, [block("mrc", 3.0), block("roce-16", 2.0),
                                                 block("roce", 5.0)])).passed


def test_the_size_sweep_needs_mrc_at_least_as_fast_at_every_size():
    def with_phases(transport, times):
        return block(transport, sum(times), phases=[
            {"message_bytes": size, "duration_s": t} for size, t in zip((10, 100), times)])

    row = "all-to-all-sizes"
    ok = JUDGES["sizes"](measured(row, [with_phases("mrc", (0.1, 1.0)),
                                        with_phases("roce", (0.2, 1.0)),
                                        with_phases("roce-16", (0.1, 1.3))]))
    assert ok.passed and "0.01 kB: mrc 0.10 s, roce-16 0.10 s" in ok.measured
    assert not JUDGES["sizes"](measured(row, [with_phases("mrc", (0.1, 1.2)),
                                              with_phases("roce", (0.2, 1.0)),
                                              with_phases("roce-16", (0.1, 1.3))])).passed


def test_the_incast_victim_is_measured_against_the_same_flow_alone():
    alone = [block("mrc", 1.0, nbytes=1_250_000), block(BASELINE, 1.0, nbytes=1_250_000)]
    under = [block("mrc", 3.0, victim_throughput={"during_incast_mbps": 9.5}),
             block(BASELINE, 3.0, victim_throughput={"during_incast_mbps": 4.0})]
    verdict = JUDGES["victim"](measured("incast-victim", under, alone))
    assert verdict.passed and verdict.figures["victim_share"] == {"mrc": 0.95, BASELINE: 0.4}
    under[0]["victim_throughput"]["during_incast_mbps"] = 8.0
    assert not JUDGES["victim"](measured("incast-victim", under, alone)).passed


def test_paper_md_has_every_row_with_its_verdict(tmp_path):
    results = [{"key": "a", "section": "5.1", "claim": "c", "criterion": "k", "differs": "d",
                "verdict": "PASS", "measured": "m1", "plot": "a.png"},
               {"key": "b", "section": "5.2", "claim": "c2", "criterion": "k2", "differs": "d2",
                "verdict": "NOT RUN", "measured": "not on this data plane: it has no faults"}]
    meta = {"topology": "t", "dataplane": "kernel", "started_at": "now", "duration_s": 12.0,
            "cores": 2, "link_rate_mbit": 2.5, "link_rate_reason": "r", "hosts": 8,
            "planes": 8, "t1_per_plane": 4, "link_emulation": {"ecn": "eBPF virtual queue"}}
    write_paper(tmp_path, meta, results)
    text = (tmp_path / "paper.md").read_text()
    assert "| a (5.1) | c | k | m1 | **PASS** |" in text
    assert "| b (5.2) | c2 | k2 | not on this data plane: it has no faults | **NOT RUN** |" in text
    assert "Verdicts: 1 PASS, 1 NOT RUN." in text and "![a](a.png)" in text
    assert [r["key"] for r in json.loads((tmp_path / "paper.json").read_text())["rows"]] == \
        ["a", "b"]


def test_an_unknown_row_is_one_line_and_exit_2(capsys):
    assert main(["--only", "t1-down,no-such-row"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-row" in err[0] and "t1-down" in err[0]



def test_link_rows_are_bounded_by_the_plane_that_lost_most():
    from experiments.paper.judge import worst_plane_loss

    fabric = with_rate_cap(load_topology("2tier-8plane"), 2.5)
    table = {c.row.key: (c.row, c.scenario) for c in checked_rows(fabric, None)}
    row, start = table["broken-at-start"]
    assert worst_plane_loss(fabric, start.faults) == 0.25  # one uplink of 4, four planes
    _, failing = table["links-failing"]
    worst = worst_plane_loss(fabric, failing.faults)
    assert 0.25 <= worst <= 0.75  # each plane keeps one whole T1
    clean = [block("mrc", 2.0), block(BASELINE, 3.0)]

    def judged(seconds):
        m = Measured(row, fabric, Pass(blocks=[block("mrc", seconds), block(BASELINE, 3.0)]),
                     Pass(blocks=clean), [], start.faults)
        return JUDGES["plane_bound"](m)

    assert judged(2.6).passed  # 0.77 of fault-free: above 1 - 0.25 - 0.05
    verdict = judged(3.0)  # 0.67
    assert not verdict.passed and "one T0 lost 25% of its uplinks" in verdict.measured


def gray_events(detect_s: float, rtt_s: float, lossy_ev: int, good_ev: int) -> list[dict]:
    """Per-packet events of h0 -> h7: packets every millisecond alternate between a good
    EV and the lossy one; from t=1 s the lossy EV's packets are lost and acknowledged
    after a resend on the good one; the path is retired `detect_s` after the first."""
    events, psn, t = [], 0, 0.5
    while t < 1.0 + max(detect_s, 0.01):
        for ev in (good_ev, lossy_ev):
            lost = ev == lossy_ev and t >= 1.0
            events.append({"t": t, "event": "send", "psn": psn, "ev": ev, "host": 0, "peer": 7})
            events.append({"t": t + rtt_s + (0.002 if lost else 0), "event": "ack", "psn": psn,
                           "ev": good_ev if lost else ev, "host": 0, "peer": 7})
            psn += 1
            t = round(t + 0.001, 6)
    events.append({"t": 1.0 + detect_s, "event": "retire", "ev": lossy_ev, "plane": 0,
                   "host": 0, "peer": 7, "reason": "late"})
    return sorted(events, key=lambda e: e["t"])


@pytest.mark.parametrize("detect_s, passes", [(0.0064, True), (0.8, False)])
def test_the_gray_loss_row_counts_rtts_no_shorter_than_the_counted_round_trip(detect_s,
                                                                             passes):
    from hosts.protocol import make_ev
    fabric = load_topology("2tier-8plane")
    (row,) = rows(fabric, lambda k: k == "ev-20pct-loss")
    spine = row.params["spine"]  # path index = spine: the EV's choice modulo 4 paths
    lossy, good = make_ev(0, spine), make_ev(0, (spine + 1) % 4)
    faulty = Pass(blocks=[block("mrc", 2.0)],
                  events={"mrc": gray_events(detect_s, 0.0002, lossy, good)})
    clean = Pass(blocks=[block("mrc", 2.0)])
    verdict = JUDGES["gray_loss"](Measured(row, fabric, faulty, clean))
    counted = fabric.spec.base_rtt_s * 1000
    # The idle path's 0.2 ms before the loss is no round trip: the counted one is used.
    assert verdict.figures["rtt_ms"] == pytest.approx(counted)
    detect_ms = verdict.figures["recovery"]["detect_ms"]
    assert detect_ms == pytest.approx(detect_s * 1000, abs=1.01)  # from the first loss
    assert verdict.figures["detect_rtts"] == pytest.approx(detect_ms / counted)
    assert verdict.passed is passes
