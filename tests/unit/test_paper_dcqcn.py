"""The appendix's Fig. 22 rows: a 15:1 incast whose flows arrive one after another,
1-QP RoCE under three DCQCN profiles, judged on the bottleneck's throughput and the
receiving ToR's sampled queue, each criterion just above and just below its threshold;
and the queue a port's state map holds at a given moment."""

from __future__ import annotations

import pytest

from controller import ebpf_config as cfg
from experiments.paper.judge import JUDGES, Measured
from experiments.paper.rows import ARRIVAL_EVERY_S, DCQCN_PROFILES, payload_rate_mbit, rows
from experiments.run.play import Pass
from experiments.run.workload_run import TransportRun
from hosts.config import ProtocolConfig
from topologies.model import load_topology, with_rate_cap

DT = 0.05  # the agents' progress samples


@pytest.fixture(scope="module")
def fabric():
    return with_rate_cap(load_topology("cluster-d"), 5.0)


def dcqcn_rows(fabric):
    return {r.key: r for r in rows(fabric, lambda k: k.startswith("dcqcn-"))}


def test_three_profiles_of_one_staggered_15_to_1_incast(fabric):
    table = dcqcn_rows(fabric)
    assert list(table) == ["dcqcn-default-incast", "dcqcn-aggressive-incast",
                           "dcqcn-most-aggressive-incast"]
    plans = {key: (r.scenario["params"], r.scenario["transports"]) for key, r in table.items()}
    assert len({repr(p) for p in plans.values()}) == 1  # the same incast for every profile
    params, transports = plans["dcqcn-default-incast"]
    assert transports == ["roce"]
    senders = [s for s, d in params["flows"]]
    assert sorted(senders) == list(range(1, 16)) and {d for _, d in params["flows"]} == {0}
    assert params["start_s"] == [round(i * ARRIVAL_EVERY_S, 4) for i in range(15)]
    # Profiles: the protocol settings each row's agents run, all of them real fields.
    for (name, changed), row in zip(DCQCN_PROFILES, table.values()):
        assert row.key == f"dcqcn-{name}-incast" and row.scenario["protocol"] == changed
        assert row.queue == ("p0t0r0", "h0")
        ProtocolConfig(**changed)
    # Shared evenly, every flow ends one interval after the last arrival.
    sizes, every = params["message_bytes"], ARRIVAL_EVERY_S
    rate = payload_rate_mbit(fabric) * 1e6 / 8
    left, t, ends = list(map(float, sizes)), 0.0, {}
    while len(ends) < 15:
        active = [i for i in range(15) if i * every <= t + 1e-9 and i not in ends]
        for i in active:
            left[i] -= rate / len(active) * 0.001
            if left[i] <= 0:
                ends[i] = t
        t += 0.001
    assert all(abs(end - 15 * every) < 0.01 for end in ends.values())


def incast_pass(row, fabric, share, queue_frames, pausing_from=None, paused_share=0.0,
                ok=True):
    """RoCE's pass of the row's flows: the receiver gets `share` of its payload line rate
    over the flows present; the ToR's queue is `queue_frames(t)` frames; it pauses a
    sender from `pausing_from` (seconds) on in `paused_share` of the samples."""
    p = row.params
    flows = [tuple(f) for f in p["flows"]]
    every, end = p["every_s"], (len(flows) + 1) * p["every_s"]
    rate = payload_rate_mbit(fabric) * share * 1e6 / 8
    totals, events = dict.fromkeys(flows, 0.0), []
    for i in range(int(round(end / DT)) + 1):
        t = i * DT
        events.append({"t": t, "event": "progress", "host": 0,
                       "rx_bytes": int(sum(totals.values())),
                       "rx_by_src": {str(s): int(v) for (s, _), v in totals.items()}})
        present = [f for k, f in enumerate(flows) if k * every <= t]
        for f in present:
            totals[f] += rate * DT / len(present)
    frame = fabric.spec.data_frame_bytes
    samples = []
    for i in range(int(end / 0.01)):
        t = i * 0.01
        pausing = (pausing_from is not None and t >= pausing_from
                   and (i % 100) < paused_share * 100)
        samples.append([round(t, 4), int(queue_frames(t) * frame), int(pausing)])
    block = {"transport": "roce", "ok": ok, "queue": {"port": "p0t0r0 eth0",
                                                      "samples": samples}}
    return Pass(runs=[TransportRun("roce", 0.0, end=end)], events={"roce": events},
                blocks=[block])


def judged(fabric, row, played):
    return JUDGES[row.judge](Measured(row, fabric, played, None))


def test_the_default_profile_goes_into_pfc_after_a_few_flows_at_line_rate(fabric):
    row = dcqcn_rows(fabric)["dcqcn-default-incast"]
    every = row.params["every_s"]

    def busy(t):
        return 20.0

    ok = judged(fabric, row, incast_pass(row, fabric, 0.96, busy, pausing_from=4.1 * every,
                                         paused_share=0.5))
    assert ok.passed and ok.figures["flows_at_first_pause"] == 5, ok.measured
    assert ok.figures["line_share"] == pytest.approx(0.96, abs=0.01)
    # Below line rate; pausing from the first flow alone; never pausing: each fails.
    assert not judged(fabric, row, incast_pass(row, fabric, 0.94, busy,
                                               pausing_from=4.1 * every,
                                               paused_share=0.5)).passed
    early = judged(fabric, row, incast_pass(row, fabric, 0.96, busy, pausing_from=0.1 * every,
                                            paused_share=0.5))
    assert not early.passed and early.figures["flows_at_first_pause"] == 1
    never = judged(fabric, row, incast_pass(row, fabric, 0.99, busy))
    assert not never.passed and never.figures["flows_at_first_pause"] is None
    assert "no flows arrived" in never.measured


@pytest.mark.parametrize("key,low,high", [("dcqcn-aggressive-incast", 0.8, 0.95),
                                          ("dcqcn-most-aggressive-incast", 0.7, 0.9)])
def test_the_aggressive_profiles_control_the_queue_and_lose_throughput(fabric, key, low,
                                                                        high):
    row = dcqcn_rows(fabric)[key]

    def swinging(t):  # empty a fifth of the time
        return 0.0 if int(t / 0.01) % 5 == 0 else 12.0

    def inside(share, **kw):
        return judged(fabric, row, incast_pass(row, fabric, share, kw.pop("queue", swinging),
                                               **kw))

    middle = (low + high) / 2
    verdict = inside(middle)
    assert verdict.passed, verdict.measured
    assert verdict.figures["empty_share"] == pytest.approx(0.2, abs=0.02)
    assert verdict.figures["paused_share"] == 0.0
    assert inside(low + 0.01).passed and inside(high - 0.01).passed
    assert not inside(low - 0.01).passed and not inside(high + 0.01).passed
    # A queue that is never empty, or a ToR pausing in a tenth of the samples, fails.
    assert not inside(middle, queue=lambda t: 12.0).passed
    assert not inside(middle, pausing_from=0.0, paused_share=0.1).passed
    assert inside(middle, pausing_from=0.0, paused_share=0.04).passed


def test_without_queue_samples_the_row_is_inconclusive(fabric):
    row = dcqcn_rows(fabric)["dcqcn-default-incast"]
    played = incast_pass(row, fabric, 0.97, lambda t: 5.0)
    played.blocks[0].pop("queue")
    verdict = judged(fabric, row, played)
    assert verdict.outcome == "INCONCLUSIVE" and "no queue samples" in verdict.inconclusive


def test_a_port_s_queue_now_is_what_it_held_less_what_it_sent_since():
    rate = 1_000_000  # bytes a second: a byte a microsecond
    state = bytes(4) + cfg.STATE_QUEUES.pack(0, 300, 5_000, 2_000, 10_000_000)[4:]
    # 1 ms later: 1,000 bytes sent, the priority queue's 300 first, then lossless.
    now = cfg.queue_now(state, rate, 11_000_000)
    assert (now.priority, now.lossless, now.data, now.paused) == (0, 4_300, 2_000, False)
    # Paused, the lossless queue keeps its bytes and data drains instead.
    paused = bytes(4) + cfg.STATE_QUEUES.pack(1, 300, 5_000, 2_000, 10_000_000)[4:]
    now = cfg.queue_now(paused, rate, 11_000_000)
    assert (now.priority, now.lossless, now.data, now.paused) == (0, 5_000, 1_300, True)
    # Long idle: everything sent; a sample from before last_ns sends nothing.
    assert cfg.queue_now(state, rate, 99_000_000) == cfg.QueueNow(0, 0, 0, False)
    assert cfg.queue_now(state, rate, 9_000_000) == cfg.QueueNow(300, 5_000, 2_000, False)
