"""Path state with hysteresis, the first timeouts, and the settings named after OCP MRC.

A retired path returns only after `probe_successes` probe replies in a row, each on time
and unmarked, at least `probe_spacing_s` apart (`probe_successes_lossy` once a probe has
failed after its first success: tests/unit/test_reinstatement.py), and its probe backoff
outlives the reinstatement. On the simulated network a path losing 20% of its packets
stays out (with one reply always enough: retired and reinstated 18-24 times in 2 s over
seeds 1-5; now at most once, on its first run, over 30 seeds), and a path that heals
comes back within a stated bound. A path with no RTT
sample of its own times out only after the initial timeout (raised to the fabric's worst
round trip), and judges nothing late within its plane until it has `rtt_min_samples`
samples: a fault-free start retires nothing.
"""

from __future__ import annotations

import dataclasses

import pytest

from hosts import protocol, wire
from hosts.config import ConfigError, ProtocolConfig
from hosts.endpoint import Endpoint, link_adjusted
from hosts.evset import ASSUMED_BAD
from hosts.loopback import Loopback
from hosts.simnet import Chaos, Outage, SimNet
from topologies.model import build_fabric, load_topology

FABRIC = load_topology("2tier-2plane")
DEFAULTS = ProtocolConfig()
GRAY = {(0, 0): Chaos(delay_s=0.001, loss=0.2)}  # plane 0, spine 0 loses a fifth


def path_events(sim: SimNet, kind: str, host: int = 0, key=(0, 0)) -> list[float]:
    """Times of `kind` events of one path of `host`'s connections, one per instant (a
    retirement or a reinstatement logs one event per EV)."""
    return sorted({round(e["t"], 9) for e in sim.events
                   if e["event"] == kind and e.get("host") == host
                   and (e.get("plane"), e.get("path")) == key})


# ---------------------------------------------------------------------- the sender
CFG = ProtocolConfig(ev_count=8, mtu_payload=100, cc="off", tick_s=0.001)


def retired_path(config: ProtocolConfig = CFG) -> tuple[Loopback, object]:
    """A connection with an RTT sample (1 ms) whose other first packet timed out: that
    packet's path retired."""
    conn = Loopback(config)
    conn.sender.send_message(0, bytes(200), 0.0)
    lost, answered = conn.send()
    conn.deliver(answered, 0.001)
    (resent,) = conn.send(0.3)
    conn.deliver(resent, 0.301)
    return conn, conn.sender.evs.by_ev[lost[1]]


def data_only_packets(packets: list) -> list:
    """The DATA packets among what a poll sent."""
    return [p for p in packets if wire.decode(p[2])[0].type == protocol.DATA]


def answer_probes(conn: Loopback, t: float, until: float, step: float = 0.001,
                  **how) -> list[float]:
    """Answer every probe from `t` to `until`, `step` later (deliver()'s options in
    `how`); the times the probes went out."""
    sent = []
    while t < until:
        for packet in conn.send(t):
            if wire.decode(packet[2])[0].type == protocol.PROBE:
                sent.append(t)
                conn.deliver(packet, t + step, **how)
        t = round(t + step, 6)
    return sent


def reply_to(packet, flags: int) -> tuple:
    hdr = wire.decode(packet[2])[0]
    ctl = wire.Control(0, 0, 0, hdr.ev, 0, 0b11)
    return wire.decode(wire.encode_control(protocol.PROBE_REPLY, flags, hdr.plane, 0,
                                           hdr.conn_id, hdr.ev, 0, hdr.psn, ctl))[:2]


def test_replies_carrying_an_ecn_echo_never_bring_a_path_back():
    conn, ev = retired_path()
    t = 0.3
    while t < 1.5:
        for packet in conn.send(t):
            if wire.decode(packet[2])[0].type == protocol.PROBE:
                conn.sender.on_packet(*reply_to(packet, protocol.F_ECN_ECHO), t + 0.001)
        t = round(t + 0.001, 6)
    assert ev.state == ASSUMED_BAD and not conn.kinds("reinstate")
    failed = conn.kinds("probe-failed")
    assert failed and {e["reason"] for e in failed} == {"ecn"}
    # A reply that arrived CE-marked itself is no better.
    conn, ev = retired_path()
    (probe,) = [p for p in conn.send(0.35) if wire.decode(p[2])[0].type == protocol.PROBE]
    conn.sender.on_probe_reply(*reply_to(probe, 0), 0.351, ce=True)
    assert conn.sender.evs.bad[ev.key].successes == 0


def test_replies_later_than_the_bound_never_bring_a_path_back():
    conn, ev = retired_path()
    bound = conn.sender.probe_bound()
    assert bound == pytest.approx(DEFAULTS.rto_min_s)  # srtt 1 ms: the timeout's floor
    answer_probes(conn, 0.3, 1.5, step=bound + 0.002)
    assert ev.state == ASSUMED_BAD and not conn.kinds("reinstate")
    assert {e["reason"] for e in conn.kinds("probe-failed")} == {"late"}


def test_a_path_returns_after_its_successes_and_its_backoff_outlives_that():
    conn, ev = retired_path()
    # Its first probe goes unanswered (the path is down: an outage), the next ones
    # are answered (it healed).
    t = 0.3
    while not conn.kinds("probe-failed"):
        conn.send(t)
        t = round(t + 0.001, 6)
    sent = answer_probes(conn, t, t + 0.3)
    assert len(sent) == CFG.probe_successes and conn.kinds("reinstate")
    back = conn.kinds("reinstate")[0]["t"]
    assert back - sent[0] >= (CFG.probe_successes - 1) * CFG.probe_spacing_s
    # The path fails again at once: its first probe waits twice the wait its probes
    # had reached (100 ms after the one that failed), not the 50 ms a fresh
    # retirement waits.
    conn.sender._retire_path(ev, back + 0.001, "timeout")
    bad = conn.sender.evs.bad[ev.key]
    assert bad.probe_at - (back + 0.001) == pytest.approx(4 * CFG.probe_initial_s)


def test_a_path_that_answers_its_first_probe_at_once_is_held_to_the_lossy_run():
    # No outage was seen: what retired it was a loss on a path that carries packets.
    conn, ev = retired_path()
    sent = answer_probes(conn, 0.3, 2.0)
    back = {round(e["t"], 6) for e in conn.kinds("reinstate")}
    # Back once, with the reply to its probe_successes_lossy-th probe (each answered
    # a millisecond after it left), not with the probe_successes-th.
    assert back == {round(sent[CFG.probe_successes_lossy - 1] + 0.001, 6)}


def test_an_unmeasured_path_waits_for_the_initial_timeout():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(200), 0.0)
    first, second = conn.send()  # one packet per plane, each on its own path
    conn.deliver(second, 0.002)  # the connection's srtt: 2 ms, its rto(0): 50 ms
    assert conn.sender.rto(0) == pytest.approx(DEFAULTS.rto_min_s)
    conn.send(0.1)
    assert not conn.kinds("timeout")  # first's path has no sample of its own yet
    conn.send(DEFAULTS.rto_initial_s + 0.001)
    assert [e["plane"] for e in conn.kinds("timeout")] == [first[0]]


def test_the_retry_counts_of_ocp_mrc():
    conn = Loopback(dataclasses.replace(CFG, retry_linear_cnt=2))
    sender = conn.sender
    sender.srtt, sender.rttvar = 0.02, 0.005
    # Two retries at the base timeout, then doubling.
    assert [sender.rto(r) for r in range(5)] == pytest.approx([0.05, 0.05, 0.05, 0.1, 0.2])
    errors = []
    conn = Loopback(dataclasses.replace(CFG, retry_exp_cnt=1, ev_min_active=0))
    conn.sender.on_error = errors.append
    conn.sender.send_message(0, bytes(100), 0.0)
    t = 0.0
    while t < 5.0 and not errors:
        conn.send(t)  # nothing is ever delivered
        t = round(t + 0.01, 6)
    (error,) = conn.kinds("qp-error")
    assert error["timeouts"] == 2 and errors == [error["t"]]  # one retry, then the error
    assert not conn.sender.busy and conn.send(t + 1.0) == []


def test_the_local_ack_timeout_of_ocp_mrc_sets_the_timeout_floor():
    config = ProtocolConfig.with_overrides({"timeout": 16})
    assert config.rto_min_s == pytest.approx(1.024e-6 * 2 ** 16)  # 67.1 ms
    assert config.ack_timeout() == 16 and DEFAULTS.ack_timeout() == 16  # 50 ms rounds up
    assert ProtocolConfig.with_overrides({"timeout": 24}).rto_max_s == pytest.approx(17.18,
                                                                                  abs=0.01)
    with pytest.raises(ConfigError, match="protocol.timeout: give either"):
        ProtocolConfig.with_overrides({"timeout": 10, "rto_min_s": 0.1})
    with pytest.raises(ConfigError, match=r"protocol.timeout: must be an integer 0..24"):
        ProtocolConfig.with_overrides({"timeout": 25})
    with pytest.raises(ConfigError, match="protocol.retry_linear_cnt: at most 7"):
        ProtocolConfig(retry_linear_cnt=8)
    with pytest.raises(ConfigError, match="protocol.retry_exp_cnt"):
        ProtocolConfig(retry_exp_cnt=26)
    with pytest.raises(ConfigError, match="protocol.probe_successes"):
        ProtocolConfig(probe_successes=0)


def test_a_ce_marked_probe_is_answered_with_an_ecn_echo():
    replies = Endpoint(2, FABRIC, "mrc", DEFAULTS, lambda e: None, lambda *a: None,
                       lambda *a: None)
    ctl = wire.Control(0, 0, 0, 5, 0, 0b11)
    probe = wire.encode_control(protocol.PROBE, 0, 0, 0, 2, 5, 0, 1, ctl)
    replies.on_datagram(0, 0, probe, True, 0.0, protocol.CONTROL)
    answers = [wire.decode(a[3])[0] for a in replies.poll(0.0)]
    answers = [a for a in answers if a.type == protocol.PROBE_REPLY]
    assert answers and all(a.flags & protocol.F_ECN_ECHO for a in answers)


# ---------------------------------------------------------------------- simulated network
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_path_losing_a_fifth_of_its_packets_is_retired_and_stays_out(seed):
    sim = SimNet(FABRIC, seed=seed, queues=True, chaos=Chaos(delay_s=0.001), path_chaos=GRAY)
    sim.send(0, 2, 0, 20_000_000)  # longer than the run: the path is always wanted
    sim.run(2.0)
    retired, back = path_events(sim, "retire"), path_events(sim, "reinstate")
    print(f"seed {seed}: retired at {[round(t, 3) for t in retired]}, "
          f"reinstated at {[round(t, 3) for t in back]}")
    assert retired and retired[0] < 0.05
    # Retire/reinstate cycles in 2 s: 18-24 with one reply enough, 0-2 with eight in a
    # row always enough; now at most one, before a probe has failed after the first
    # success (0.8^7 = 21% of retirements).
    assert len(back) <= 1 and all(t < 0.5 for t in back)
    # The run is never left without the path for lack of a verdict: it ends retired.
    assert len(retired) == len(back) + 1


# How long a healed path may take to return: the wait its probes have reached (at most
# probe_max_s), then probe_successes replies spaced probe_spacing_s apart, each a round
# trip and a timer tick late at most (5 ms on this fabric).
HEAL_BOUND_S = DEFAULTS.probe_max_s + DEFAULTS.probe_successes * (DEFAULTS.probe_spacing_s
                                                                  + 0.005)


# How soon a dead spine is retired: its first packet late within a round trip or two
# holds it, then its probe finds no answer within the path's round trip plus what
# queues could add to it and not to a sibling (path_skew_s, 12.4 ms on this fabric).
DETECT_BOUND_S = link_adjusted(DEFAULTS, FABRIC).path_skew_s + 0.01


@pytest.mark.parametrize("down_s", [0.1, 0.6, 3.0])
def test_a_healed_path_returns_within_the_bound(down_s):
    start = 0.1
    sim = SimNet(FABRIC, seed=1, queues=True, chaos=Chaos(delay_s=0.001),
                 outages=[Outage(0, spine=0, start=start, end=start + down_s)])
    sim.send(0, 2, 0, 50_000_000)
    sim.run(start + down_s + HEAL_BOUND_S)
    retired, back = path_events(sim, "retire"), path_events(sim, "reinstate")
    assert len(retired) == 1 and retired[0] - start < DETECT_BOUND_S
    assert len(back) == 1, "not back within the bound"
    print(f"down {down_s} s: back {back[0] - start - down_s:.3f} s after the heal "
          f"(bound {HEAL_BOUND_S:.2f} s)")
    assert start + down_s < back[0] <= start + down_s + HEAL_BOUND_S
    # And it carries data again.
    before = sim.data_on_path[(0, 0)]
    sim.run(sim.now + 0.05)
    assert sim.data_on_path[(0, 0)] > before


@pytest.mark.parametrize("seed", [1, 2])
def test_a_fault_free_start_on_three_planes_retires_nothing(seed):
    # The case: an odd number of planes, every host sending to every other.
    # Same-rack detours (now off) and in-plane bounds from a single RTT sample, taken
    # while the queues were empty, retired 3-6 paths in the first 100 ms of this run
    # (rack_local_paths "all", rtt_min_samples 1, four EVs per path).
    spec = dataclasses.replace(load_topology("2tier-8plane").spec, name="3-plane", planes=3)
    fabric = build_fabric(spec)
    sim = SimNet(fabric, seed=seed, queues=True, chaos=Chaos(delay_s=0.0005),
                 protocol={"ev_seed": seed})
    n = len(fabric.hosts)
    transfers = [(s, d, 0) for s in range(n) for d in range(n) if s != d]
    for s, d, m in transfers:
        sim.send(s, d, m, 300_000)
    sim.run(0.1)
    assert not [e for e in sim.events if e["event"] in ("retire", "timeout")]


def test_a_path_whose_plane_went_down_while_it_was_out_returns_after_probe_successes():
    # The plane's outage is one its probes could not see (none is sent on a plane that
    # is down): a first probe answered after the plane returns says nothing of loss.
    conn, ev = retired_path()
    conn.sender.set_local_plane(ev.plane, False, 0.301)
    conn.sender.set_local_plane(ev.plane, True, 0.4)
    sent = answer_probes(conn, 0.4, 1.0)
    back = {round(e["t"], 6) for e in conn.kinds("reinstate")}
    assert back == {round(sent[CFG.probe_successes - 1] + 0.001, 6)}


def test_a_path_retired_just_after_its_plane_came_back_returns_after_probe_successes():
    # A port that comes up loses its first packets while its routes are put back: an
    # outage, not a lossy path, though its first probe is answered at once.
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(200), 0.0)
    first, second = conn.send()
    conn.deliver(first, 0.001)
    conn.deliver(second, 0.001)
    ev = conn.sender.evs.by_ev[first[1]]
    conn.sender.set_local_plane(ev.plane, False, 0.1)
    conn.sender.set_local_plane(ev.plane, True, 0.3)
    conn.sender._retire_path(ev, 0.304, "late-in-plane")
    assert conn.sender.evs.bad[ev.key].outage
    sent = answer_probes(conn, 0.304, 1.0)
    back = {round(e["t"], 6) for e in conn.kinds("reinstate")}
    assert back == {round(sent[CFG.probe_successes - 1] + 0.001, 6)}
    # Long after the plane's return, the same first probe answered at once is a loss.
    conn.sender._retire_path(ev, 2.0, "late-in-plane")
    assert not conn.sender.evs.bad[ev.key].outage


def test_a_packet_lost_to_the_port_coming_up_is_an_outage_though_its_timeout_comes_later():
    # The packet left just after its plane came back and was lost while the routes were
    # put back; its loss is found after the first probe's wait (50 ms) has run from the
    # plane's return. The send time decides: an outage, not a lossy path.
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(200), 0.0)
    for packet in conn.send():
        conn.deliver(packet, 0.001)
    plane = conn.sender.evs.rotation[0].plane
    conn.sender.set_local_plane(plane, False, 0.1)
    conn.sender.set_local_plane(plane, True, 0.3)
    conn.sender.send_message(1, bytes(1600), 0.3)
    out = data_only_packets(conn.send(0.3))
    lost = next(p for p in out if p[0] == plane)
    # The others' acks arrive only once the first probe's wait has run, so the loss
    # is found after it.
    t = round(0.3 + CFG.probe_initial_s + 0.002, 6)
    for packet in out:
        if packet is not lost:
            conn.deliver(packet, t)
    while not conn.kinds("retire") and t < 1.0:
        t = round(t + 0.001, 6)
        for packet in conn.send(t):  # the lost packet's path delivers nothing more
            if packet[:2] != lost[:2]:
                conn.deliver(packet, t)
    (retire, *_) = conn.kinds("retire")
    assert retire["t"] - 0.3 > CFG.probe_initial_s  # the verdict came after the wait
    key = conn.sender.evs.by_ev[lost[1]].key
    assert conn.sender.evs.bad[key].outage
