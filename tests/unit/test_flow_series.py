"""Throughput per flow from the agents' progress samples, the figures of each phase, and
flows.png: synthetic samples (restarts, hosts that never report) and a simulated run."""

from __future__ import annotations

import pytest

from experiments.analysis.metrics import (
    SERIES_POINTS_PER_TRANSPORT,
    flow_curves,
    flow_mbps,
    flow_series,
    flow_throughput,
    goodput_series,
    phase_figures,
    summarize,
    victim_throughput,
)
from experiments.analysis.plots import MAX_FLOW_LINES, flow_lines, flows_plot
from experiments.run.workload_run import TransferResult, TransportRun
from hosts.simnet import SimNet

START = 100.0


def samples(host: int, per_sample: dict[int, int], n: int, t0: float = START,
            every: float = 0.05, offset: dict[int, int] | None = None) -> list[dict]:
    """`n` progress samples of `host`, each source's counter growing by its rate."""
    offset = offset or {}
    return [{"t": t0 + i * every, "event": "progress", "host": host,
             "rx_by_src": {str(src): offset.get(src, 0) + i * step
                           for src, step in per_sample.items() if offset.get(src, 0) + i * step}}
            for i in range(n)]


def test_steady_flows_give_flat_series_also_when_samples_straddle_bins():
    # 62,500 bytes per 50 ms is 10 Mbit/s; host 3's samples fall mid-bin.
    events = samples(1, {0: 62_500}, 21) + samples(3, {0: 31_250, 2: 62_500}, 21,
                                                    t0=START + 0.025)
    series = flow_series(sorted(events, key=lambda e: e["t"]), START, 0.1)
    assert sorted(series) == [(0, 1), (0, 3), (2, 3)]
    assert [t for t, _ in series[(0, 1)]] == pytest.approx([i * 0.1 for i in range(10)])
    assert [v for _, v in series[(0, 1)]] == pytest.approx([10.0] * 10)
    # Mid-bin samples: whole bins are exact, the edges hold what fell in them.
    assert [v for _, v in series[(2, 3)][1:10]] == pytest.approx([10.0] * 9)
    assert [v for _, v in series[(0, 3)][1:10]] == pytest.approx([5.0] * 9)
    assert series[(2, 3)][0][1] == pytest.approx(7.5) and series[(2, 3)][10][1] == \
        pytest.approx(2.5)
    total = sum(v for _, v in series[(2, 3)]) * 0.1 / 8 * 1e6
    assert total == pytest.approx(20 * 62_500)


def test_a_counter_that_resets_counts_on_and_silent_hosts_are_absent():
    # Host 2 restarts between 0.2 s and 0.25 s: its counter starts again from zero.
    before = samples(2, {0: 62_500}, 5)  # 0 .. 250,000 bytes at 0.2 s
    after = samples(2, {0: 62_500}, 5, t0=START + 0.25, offset={0: 62_500})
    old_format = [{"t": START + 0.1, "event": "progress", "host": 1, "rx_bytes": 10**6}]
    events = sorted(before + after + old_format, key=lambda e: e["t"])
    curves, span = flow_curves(events)
    assert curves[(0, 2)][-1] == (pytest.approx(START + 0.45), 9 * 62_500)
    assert 1 not in span and 3 not in span
    series = flow_series(events, START, 0.1)
    assert list(series) == [(0, 2)]
    # 0.45 s of samples: the last bin is half full.
    assert [v for _, v in series[(0, 2)]] == pytest.approx([10.0] * 4 + [5.0])
    # Host 3 never reported: its flows have no figure, not a zero.
    assert flow_mbps(events, 0, 3, START, START + 0.4) is None
    # Host 2 reported, but nothing from host 1: zero.
    assert flow_mbps(events, 1, 2, START, START + 0.4) == 0.0


def test_flow_mbps_over_a_window():
    # 10 Mbit/s for 0.5 s, then 2.5 Mbit/s.
    events = samples(1, {0: 62_500}, 11)
    tail = samples(1, {0: 15_625}, 11, t0=START + 0.5, offset={0: 10 * 62_500})
    events = sorted(events + tail[1:], key=lambda e: e["t"])
    assert flow_mbps(events, 0, 1, START, START + 0.5) == pytest.approx(10.0)
    assert flow_mbps(events, 0, 1, START + 0.5, START + 1.0) == pytest.approx(2.5)
    assert flow_mbps(events, 0, 1, START + 0.25, START + 0.75) == pytest.approx(6.25)
    assert flow_mbps(events, 0, 1, START + 0.51, START + 0.5) is None
    assert flow_mbps(events, 0, 1, START + 5, START + 6) is None  # after the last sample


def run_with(transfers, end=START + 1.0):
    run = TransportRun("mrc", START, end)
    run.transfers = transfers
    return run


def test_phase_figures_read_a_size_sweep_per_size():
    # Two sizes, two transfers each; phase 1 is cut short by the timeout.
    run = run_with([
        TransferResult(0, 1, 0, 125_000, "data", 0, START, START + 0.1, START + 0.1, True),
        TransferResult(1, 0, 0, 125_000, "data", 0, START, START + 0.2, START + 0.2, True),
        TransferResult(0, 1, 1, 1_000_000, "data", 1, START + 0.2, START + 1.0, START + 1.0,
                       True),
        TransferResult(1, 0, 1, 1_000_000, "data", 1, START + 0.2, None, None, False),
    ])
    assert phase_figures(run) == [
        {"phase": 0, "message_bytes": 125_000, "transfers": 2, "delivered": 2,
         "duration_s": 0.2, "goodput_mbps": 10.0},
        {"phase": 1, "message_bytes": 1_000_000, "transfers": 2, "delivered": 1,
         "duration_s": 0.8, "goodput_mbps": 10.0},
    ]
    mixed = run_with([
        TransferResult(2, 0, 0, 1000, "data", 0, START, None, None, False),
        TransferResult(3, 1, 0, 5000, "victim", 0, START, None, None, False)])
    assert phase_figures(mixed) == [{"phase": 0, "message_bytes": [1000, 5000],
                                     "transfers": 2, "delivered": 0, "duration_s": None,
                                     "goodput_mbps": None}]


def test_flow_throughput_mean_and_min_while_active_and_the_victim_alone():
    # h2 -> h0 (incast) for 0.6 s at 10 Mbit/s; the victim h3 -> h1 gets 5 Mbit/s while
    # the incast runs, 10 Mbit/s after it, with a stall from 0.3 to 0.4 s.
    incast = samples(0, {2: 62_500}, 13)
    victim = []
    total = 0
    for i in range(21):
        t = START + i * 0.05
        victim.append({"t": t, "event": "progress", "host": 1, "rx_by_src": {"3": total}})
        if not 6 <= i < 8:
            total += 31_250 if i < 12 else 62_500
    events = sorted(incast + victim, key=lambda e: e["t"])
    run = run_with([
        TransferResult(2, 0, 0, 750_000, "data", 0, START, START + 0.6, START + 0.6, True),
        TransferResult(3, 1, 0, 937_500, "victim", 0, START, START + 1.0, START + 1.0, True),
        TransferResult(0, 3, 0, 1000, "data", 1, START, None, None, False),  # h3 silent
    ])
    figures = flow_throughput(run, events)
    assert (figures["start_t"], figures["bin_s"], figures["series_bin_s"]) == (START, 0.1, 0.1)
    by_flow = {(f["src"], f["dst"]): f for f in figures["flows"]}
    assert by_flow[(2, 0)]["mean_mbps"] == pytest.approx(10.0)
    assert by_flow[(2, 0)]["active_s"] == [0.0, 0.6] and by_flow[(2, 0)]["bytes"] == 750_000
    v = by_flow[(3, 1)]
    assert v["role"] == "victim" and v["min_mbps"] == pytest.approx(0.0, abs=1e-9)
    assert v["series_mbps"][:3] == [5.0, 5.0, 5.0] and v["series_mbps"][-1] == 10.0
    silent = by_flow[(0, 3)]
    assert silent["mean_mbps"] is None and silent["series_mbps"] == [] and silent["bytes"] == 0
    alone = victim_throughput(run, events)
    assert alone["incast_s"] == 0.6 and alone["after_incast_mbps"] == pytest.approx(10.0)
    assert alone["during_incast_mbps"] == pytest.approx(5.0 * 5 / 6, abs=0.01)
    assert victim_throughput(run_with(run.transfers[:1]), events) is None
    block = summarize(run, events)
    assert block["flow_throughput"] == figures and block["victim_throughput"] == alone
    assert [p["phase"] for p in block["phases"]] == [0, 1]


def test_stored_series_are_capped_for_many_flows():
    # 56 flows (all-to-all on 8 hosts) over 20 s: 200 bins each, merged to fit.
    events = []
    for dst in range(8):
        events += samples(dst, {s: 6_250 for s in range(8) if s != dst}, 401)
    events.sort(key=lambda e: e["t"])
    run = run_with([TransferResult(s, d, 0, 400 * 6_250, "data", 0, START, START + 20,
                                   START + 20, True)
                    for s in range(8) for d in range(8) if s != d], end=START + 20)
    figures = flow_throughput(run, events)
    lengths = [len(f["series_mbps"]) for f in figures["flows"]]
    assert len(lengths) == 56 and sum(lengths) <= SERIES_POINTS_PER_TRANSPORT
    assert figures["series_bin_s"] == pytest.approx(0.1 * 200 / max(lengths), rel=0.2)
    assert all(f["mean_mbps"] == pytest.approx(1.0) for f in figures["flows"])
    assert figures["flows"][0]["series_mbps"][1] == pytest.approx(1.0)


def test_flows_png_shows_every_flow_or_the_victim_and_per_destination_sums(tmp_path):
    events = []
    for dst in range(4):
        events += samples(dst, {s: 6_250 for s in range(4) if s != dst}, 21)
    events.sort(key=lambda e: e["t"])
    run = run_with([TransferResult(s, d, 0, 10, "victim" if (s, d) == (3, 1) else "data", 0,
                                   START, START + 1, START + 1, True)
                    for s in range(4) for d in range(4) if s != d])
    assert len(flow_series(events, START)) == 12 > MAX_FLOW_LINES
    lines = flow_lines(run, events)
    labels = [label for label, _ in lines]
    assert labels[0] == "victim h3->h1" and "all->h0 (3 flows)" in labels
    assert "all->h1 (2 flows)" in labels and len(labels) == 5
    assert [v for _, v in dict(lines)["all->h0 (3 flows)"]][:3] == pytest.approx([3.0] * 3)
    few = run_with(run.transfers[:2])
    assert [label for label, _ in flow_lines(few, samples(1, {0: 10}, 3))] == ["h0->h1"]
    baseline = TransportRun("single-path", START, START + 1, transfers=run.transfers)
    out = tmp_path / "flows.png"
    flows_plot(out, [run, baseline], {"mrc": events, "single-path": []})
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("transport", ["mrc", "roce-8"])
def test_endpoint_progress_counts_bytes_per_source(fabric, transport):
    """The agents' samples on a simulated network: per-source bytes add up to what was
    sent, a queue pair's bytes included, and the flow series carry the same bytes."""
    net = SimNet(fabric, transport, seed=4)
    sizes = {(0, 3): 300_000, (1, 3): 200_000, (2, 0): 100_000}
    for (src, dst), size in sizes.items():
        net.send(src, dst, 0, size)
    events, t = [], 0.0
    transfers = [(src, dst, 0) for src, dst in sizes]
    while not net.all_done(transfers) and t < 5.0:
        t = net.run(t + 0.01)
        events += [{"t": t, "event": "progress", "host": h, **e.progress()}
                   for h, e in enumerate(net.hosts)]
    assert net.all_done(transfers)
    last = {e["host"]: e for e in events[-4:]}
    assert last[3]["rx_by_src"] == {0: 300_000, 1: 200_000}
    assert last[0]["rx_by_src"] == {2: 100_000} and last[1]["rx_by_src"] == {}
    assert last[3]["rx_bytes"] == 500_000
    series = flow_series(events, 0.0, 0.05)
    assert {flow: round(sum(v for _, v in points) * 0.05 / 8 * 1e6)
            for flow, points in series.items()} == sizes


def test_goodput_counts_on_after_an_agent_restart():
    rx = [0, 125_000, 250_000, 100_000, 225_000]  # restarted before the fourth sample
    # Samples mid-bin: goodput_series counts a sample's bytes in the bin it falls in.
    events = [{"t": START + 0.05 + 0.1 * i, "event": "progress", "host": 1, "rx_bytes": n}
              for i, n in enumerate(rx)]
    assert [g for _, g in goodput_series(events, START)] == pytest.approx(
        [0.0, 10.0, 10.0, 8.0, 10.0])
