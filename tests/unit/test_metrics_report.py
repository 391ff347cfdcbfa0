"""Metrics, plots and the report from a synthetic run (no network needed)."""

from __future__ import annotations

import json

from experiments.analysis.metrics import (
    goodput_series,
    path_failure_recovery,
    percentile,
    read_events,
    summarize,
    workload_ok,
)
from experiments.analysis.plots import fct_cdf_plot, goodput_plot, path_state_plot
from experiments.analysis.report import write_report
from experiments.run.workload_run import TransferResult, TransportRun
from experiments.scenarios.scenario import scale_note


def synthetic(tmp_path):
    events_file = tmp_path / "events.jsonl"
    events = [{"t": 10.0 + i * 0.1, "event": "progress", "host": 1, "rx_bytes": i * 125_000}
              for i in range(11)]
    events += [{"t": 10.35, "event": "retire", "host": 0, "plane": 0},
               {"t": 10.6, "event": "reinstate", "host": 0, "plane": 0}]
    events_file.write_text("\n".join(json.dumps(e) for e in events) + "\n{cut short")
    run = TransportRun("mrc", start=10.0, end=11.0, event_files=[events_file],
                       faults=[{"t": 0.3, "event": "fault", "fault": "link-flap",
                                "target": ["a", "b"], "up": False}])
    run.transfers = [TransferResult(0, 1, 0, 1_250_000, "data", 0, 10.0, 11.0, 11.0, True),
                     TransferResult(0, 1, 1, 1_000, "victim", 0, 10.0, None, None, False)]
    return run


def test_summary_figures(tmp_path):
    run = synthetic(tmp_path)
    events = read_events(run.event_files)  # the cut-short last line is skipped
    assert len(events) == 13
    block = summarize(run, events)
    assert (block["transfers"], block["transfers_done"], block["transfers_failed"]) == (2, 1, 1)
    assert block["ok"] is False and block["goodput_mbps"] == 10.0
    assert block["path_events"] == {"reinstate": 1, "retire": 1}
    assert block["victim_fct_s"] is None and block["fct_p50_s"] == 1.0
    series = goodput_series(events, run.start)
    assert series[0][1] == 10.0 and len(series) == 11
    assert percentile([3, 1, 2], 50) == 2 and percentile([], 50) is None


def test_plots_and_report_are_written(tmp_path):
    run = synthetic(tmp_path)
    events = {"mrc": read_events(run.event_files)}
    for plot, args in ((goodput_plot, (events,)), (path_state_plot, (events,)),
                       (fct_cdf_plot, ())):
        out = tmp_path / f"{plot.__name__}.png"
        plot(out, [run], *args)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = {"scenario": "s", "topology": "t", "dataplane": "kernel", "hosts": 2,
               "switches": 2, "planes": 1, "transports": [summarize(run, events["mrc"])],
               "faults": run.faults, "link_emulation": {"notes": ["no ECN"]}}
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert "| completed and verified | 1/2 |" in text
    assert "t=0.30s link-flap a b down" in text and "Note: no ECN." in text
    assert "BMv2" not in text and "of its size" not in text and "dilated" not in text
    summary.update(dataplane="bmv2", bmv2_link_rate_mbit=0.4,
                   bmv2_link_rate_reason="capped from the topology's 10 Mbit/s: ...",
                   workload={"data_scale": 0.04, "fit": scale_note(0.04)})
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert "Links at 0.4 Mbit/s on BMv2: capped from the topology's 10 Mbit/s" in text
    assert "Every transfer at 0.04 of its size: the links run" in text
    assert "Split across servers" not in text
    summary["servers"] = {
        "hosts": {"address": "10.250.0.10", "namespace": True, "planes": [], "hosts": "all"},
        "b": {"address": "192.0.2.12", "namespace": False, "planes": [4, 5], "hosts": []}}
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert ("Split across servers: hosts (namespace server): hosts all; b (192.0.2.12): "
            "planes 4, 5; the rest on this machine.") in text


def test_a_run_with_a_fault_that_failed_to_apply_is_not_ok(tmp_path):
    run = synthetic(tmp_path)
    run.transfers = run.transfers[:1]  # every transfer done and verified
    clean = summarize(run, [])
    baseline = dict(clean, transport="single-path")
    assert workload_ok([clean, baseline])
    run.fault_errors = ["link-flap a b down: no link between a and b"]
    failed = summarize(run, [])
    assert failed["ok"] is True and failed["fault_errors"] == run.fault_errors
    assert not workload_ok([failed, baseline])
    # The baseline's fault errors count too: both must have run under the same faults.
    assert not workload_ok([clean, dict(failed, transport="single-path")])
    assert not workload_ok([dict(clean, ok=False), baseline])
    assert not workload_ok([])
    summary = {"scenario": "s", "topology": "t", "dataplane": "kernel", "hosts": 2,
               "switches": 2, "planes": 1, "transports": [failed, baseline]}
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert "## Faults that failed to apply" in text
    assert "- mrc: link-flap a b down: no link between a and b" in text


def test_recovery_from_a_path_failure_is_timed_from_the_first_lost_packet():
    # Paths are EV & 1 here. Packets every ms alternate paths; RTT 0.5 ms. Path 1
    # fails after PSN 5 got through: PSNs 7 and 9 are lost, the sender retires path 1
    # at 11.2 ms and the two packets are acknowledged over path 0 at 11.8 and 12.4 ms.
    events = []
    for psn in range(12):
        ev = psn % 2
        t = psn * 0.001
        events.append({"t": t, "event": "send", "psn": psn, "ev": ev, "host": 0, "peer": 1})
        if ev == 0 or psn < 7:
            events.append({"t": t + 0.0005, "event": "ack", "psn": psn, "ev": ev, "host": 0,
                           "peer": 1})
    events.append({"t": 0.0112, "event": "retire", "host": 0, "peer": 1})
    for psn, t in ((7, 0.0118), (9, 0.0124)):
        events.append({"t": t - 0.0005, "event": "send", "psn": psn, "ev": 0, "host": 0,
                       "peer": 1, "retransmit": True})
        events.append({"t": t, "event": "ack", "psn": psn, "ev": 0, "host": 0, "peer": 1})
    events.sort(key=lambda e: e["t"])
    figures = path_failure_recovery(events, 0, 1, 1, lambda ev: ev & 1)
    assert figures["failed_at"] == 0.007 and figures["lost_packets"] == 2
    assert figures["uncertainty_ms"] == 2.0  # PSN 5, at 5 ms, got through
    assert figures["detect_ms"] == 4.2 and figures["repaired_ms"] == 5.4
    assert figures["rtt_median_ms"] == 0.5 and figures["repaired_rtts"] == 10.8
    assert path_failure_recovery(events, 0, 1, 0, lambda ev: ev & 1) is None
    # PSN 3, sent on path 1 at 3 ms, was also sent again on path 0 (a tail probe's
    # resend) and acknowledged there first: before the fault, that is no loss.
    events.append({"t": 0.0036, "event": "ack", "psn": 3, "ev": 0, "host": 0, "peer": 1})
    events.sort(key=lambda e: e["t"])
    assert path_failure_recovery(events, 0, 1, 1, lambda ev: ev & 1)["failed_at"] == 0.003
    since = path_failure_recovery(events, 0, 1, 1, lambda ev: ev & 1, since=0.006)
    assert since["failed_at"] == 0.007 and since["lost_packets"] == 2


def test_the_report_shows_each_transport_against_its_own_fault_free_run(tmp_path):
    run = synthetic(tmp_path)
    block = summarize(run, [])
    summary = {"scenario": "s", "topology": "t", "dataplane": "kernel", "hosts": 2,
               "switches": 2, "planes": 1, "transports": [block],
               "slowdown": [{"transport": "mrc", "slowdown": 0.25, "finished": True,
                             "faulty_s": 1.25, "clean_s": 1.0, "goodput_ratio": 0.8,
                             "note": ""}]}
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert "## Against each transport's own fault-free run" in text
    assert "- mrc: +25.0% (1.250 s against 1.000 s without faults)" in text
    del summary["slowdown"]
    write_report(tmp_path / "report.md", summary)
    assert "fault-free" not in (tmp_path / "report.md").read_text()
