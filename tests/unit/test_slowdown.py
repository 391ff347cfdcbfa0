"""Each transport against its own fault-free run: the slowdown figures and their line."""

from __future__ import annotations

import pytest

from experiments.analysis.slowdown import describe, slowdown, slowdowns, verdict


def block(transport, seconds, ok=True, goodput=None):
    return {"transport": transport, "ok": ok, "workload_s": seconds,
            "goodput_mbps": goodput if goodput is not None else 8 / seconds}


def test_slowdown_is_the_time_the_faults_added_to_the_transports_own_run():
    entry = slowdown(block("mrc", 1.05), block("mrc", 1.0))
    assert entry["slowdown"] == pytest.approx(0.05) and entry["finished"]
    assert entry["goodput_ratio"] == pytest.approx(1 / 1.05, abs=1e-4)
    assert describe(entry) == "+5.0% (1.050 s against 1.000 s without faults)"


def test_each_transport_is_compared_with_itself_not_with_the_other():
    faulty = [block("mrc", 2.2), block("roce-8", 9.0, ok=False)]
    clean = [block("roce-8", 4.0), block("mrc", 2.0)]
    mrc, roce = slowdowns(faulty, clean)
    assert mrc["slowdown"] == pytest.approx(0.1) and roce["slowdown"] == pytest.approx(1.25)
    assert not roce["finished"] and describe(roce).startswith(">= +125.0%")
    assert "did not finish" in describe(roce)


def test_missing_or_failed_references_give_no_figure():
    (entry,) = slowdowns([block("roce", 3.0)], [block("mrc", 1.0)])
    assert entry["slowdown"] is None and describe(entry) == \
        "n/a (no fault-free run of this transport)"
    failed = slowdown(block("roce", 3.0), block("roce", 60.0, ok=False))
    assert failed["slowdown"] is None and "fault-free run did not finish" in failed["note"]
    with pytest.raises(ValueError, match="mrc"):
        slowdown(block("mrc", 1.0), block("roce", 1.0))


def test_a_baseline_whose_queue_pair_went_to_the_error_state_aborted_its_job():
    faulty = dict(block("roce-8", 7.7, ok=False), aborted={"t": 7.7033, "src": 0, "dst": 4,
                                                           "qp": 5})
    entry = slowdown(faulty, block("roce-8", 6.4))
    assert entry["note"] == ("job aborted: a queue pair of h0 -> h4 went to the error state "
                             "at 7.70 s")
    assert slowdown(block("roce-8", 9.0, ok=False), block("roce-8", 6.4))["note"] \
        .startswith("did not finish")


def test_the_verdict_says_mrc_rode_out_the_faults_only_when_it_beat_every_baseline():
    mrc = slowdown(block("mrc", 2.1), block("mrc", 2.0))
    roce = slowdown(block("roce-8", 6.0), block("roce-8", 3.0))
    line = verdict([mrc, roce])
    assert line.startswith("verdict: MRC rode out the faults better") and "+100.0%" in line
    worse = slowdown(block("roce-8", 3.1), block("roce-8", 3.0))
    assert "not better than every baseline" in verdict([mrc, worse])
    aborted = slowdown(block("roce-8", 9.0, ok=False), block("roce-8", 3.0))
    assert "rode out" in verdict([mrc, aborted]) and "did not finish" in verdict([mrc, aborted])
    stalled = slowdown(block("mrc", 9.0, ok=False), block("mrc", 2.0))
    assert "did not ride out" in verdict([stalled, roce])
    assert "did not keep up" in verdict([mrc, roce], trustworthy=False)
    assert verdict([mrc]).startswith("verdict: none")
