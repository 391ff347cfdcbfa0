"""A run's proportions against the paper's regime, and a paper row judged over its
repetitions (pure: no network)."""

from __future__ import annotations

import pytest

from experiments.analysis.report import write_report
from experiments.analysis.similarity import headline, proportions
from experiments.faults import parse_faults
from experiments.paper.judge import Verdict
from experiments.paper.replay import combine, median_run, spread
from experiments.run.play import Pass
from experiments.scenarios.workloads import phases
from topologies.model import load_topology, with_rate_cap, without_delay


def test_the_shipped_fabric_is_in_band_and_a_deep_queue_is_flagged():
    fabric = without_delay(load_topology("2tier-8plane"))
    block = proportions(fabric, {})
    assert block["deciding_out_of_band"] == [], block
    numbers = block["numbers"]
    assert numbers["queue_bdp"]["value"] == pytest.approx(
        fabric.spec.host_t0.queue_pkts / fabric.spec.bdp_frames, abs=1e-3)
    # The same topology run where its delays are not emulated, with the thresholds it
    # derived from them: the round trip is shorter, every queue more BDPs deep.
    raw = proportions(load_topology("2tier-8plane"), {}, delay_emulated=False)
    assert "queue_bdp" in raw["deciding_out_of_band"]
    assert "queue_bdp" in headline(raw) and "out of the paper's regime" in headline(raw)


def test_the_numbers_of_2tier_2plane_worked_by_hand():
    # Every link 20 Mbit/s, no delay; a DATA frame is 1,294 bytes on the wire, an ack
    # 118. A frame takes 1294 * 8 / 20e6 = 0.5176 ms on a link, an ack 0.0472 ms.
    # The round trip crosses 4 links out and 4 back: 4 * 0.5176 + 4 * 0.0472 = 2.2592 ms.
    # BDP: 20e6 / 8 * 2.2592e-3 = 5,648 bytes = 4.3648 frames. The queue, 64 frames of
    # 12.09 BDP with delay, is 64 * 4.3648 / 12.09 = 23.1, so 23 frames: 23 / 4.3648 =
    # 5.2694 BDP; ECN from 2 frames = 0.4582 BDP; trimming at 5 frames = 1.1455 BDP. The
    # timeout floor is one full queue drained at the host's rate: 23 * 0.5176 = 11.9048
    # ms = 5.2694 RTT.
    block = proportions(without_delay(load_topology("2tier-2plane")), {})
    numbers = {name: entry["value"] for name, entry in block["numbers"].items()}
    assert block["base_rtt_ms"] == pytest.approx(2.2592, abs=1e-3)
    assert numbers["bdp_frames"] == pytest.approx(4.3648, abs=1e-3)
    assert numbers["queue_bdp"] == pytest.approx(5.2694, abs=1e-3)
    assert numbers["ecn_kmin_bdp"] == pytest.approx(0.4582, abs=1e-3)
    assert numbers["trim_bdp"] == pytest.approx(1.1455, abs=1e-3)
    assert numbers["rto_min_rtt"] == pytest.approx(5.2694, abs=1e-3)


def test_a_capped_fabric_keeps_its_proportions():
    fabric = without_delay(load_topology("2tier-8plane"))
    before = proportions(fabric, {})["numbers"]
    after = proportions(with_rate_cap(fabric, 10 / 25), {})["numbers"]
    # Without delay the BDP is serialization alone: the same frames at any rate.
    for name in ("bdp_frames", "queue_bdp", "trim_bdp", "rto_min_rtt"):
        assert after[name]["value"] == pytest.approx(before[name]["value"], rel=0.05), name


def test_faults_and_transfers_in_round_trips(tmp_path):
    fabric = without_delay(load_topology("2tier-2plane"))
    steps = parse_faults([{"kind": "link-flap", "link": ["p0t0r0", "p0t1s0"], "at_s": 0.5,
                           "down_s": 0.2}], fabric)
    plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": 1_200_000}, fabric)
    block = proportions(fabric, {}, steps, plan, lag_p99_ms=100.0)
    rtt = block["base_rtt_ms"] / 1000
    (fault,) = block["faults"]
    assert fault["at_rtt"] == pytest.approx(0.5 / rtt, abs=0.1)
    assert fault["duration_rtt"] == pytest.approx(0.2 / rtt, abs=0.1)
    assert "agent_lag_p99_rtt" in block["deciding_out_of_band"]  # 100 ms is many RTTs
    summary = {"scenario": "s", "topology": "2tier-2plane", "dataplane": "kernel",
               "hosts": 4, "switches": 8, "planes": 2, "transports": [],
               "similarity": block}
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert text.splitlines()[2].startswith("Proportions out of the paper's regime: "
                                           "agent_lag_p99_rtt")
    assert "| agent_lag_p99_rtt |" in text and "**out of band**" in text


def test_a_row_is_judged_over_its_repetitions():
    passed = Verdict(True, {"mrc": {"ratio": 0.97}}, "mrc 0.97")
    failed = Verdict(False, {"mrc": {"ratio": 0.85}}, "mrc 0.85")
    agree = combine([passed, passed, passed], 1)
    assert agree["verdict"] == "PASS" and agree["outcomes"] == ["PASS"] * 3
    mixed = combine([passed, failed, passed], 0, ("mrc",))
    assert mixed["verdict"] == "INCONCLUSIVE"
    assert mixed["measured"] == ("mrc 0.97 [3 runs, this one the median; verdicts PASS, FAIL, "
                                 "PASS; median (min to max): mrc.ratio 0.97 (0.85 to 0.97)]")
    assert spread([{"a": {"b": 1}}, {"a": {"b": 3}}, {"a": {"b": 2}}]) == {
        "a.b": {"median": 2.0, "min": 1.0, "max": 3.0}}


def test_the_median_repetition_is_the_median_mrc_time():
    def run(seconds: float) -> tuple[Pass, None]:
        played = Pass()
        played.blocks.append({"transport": "mrc", "workload_s": seconds})
        return played, None

    assert median_run([run(3.0), run(1.0), run(2.0)]) == 2


def test_the_ack_delay_is_shown_in_round_trips():
    fabric = load_topology("2tier-2plane")
    held = proportions(fabric, {"ack_delay_rtts": 0.75})["numbers"]["ack_delay_rtt"]
    assert held["value"] == pytest.approx(0.75, abs=0.001) and held["out_of_band"]
    at_once = proportions(fabric, {})["numbers"]["ack_delay_rtt"]
    assert at_once["value"] == 0 and "out_of_band" not in at_once
