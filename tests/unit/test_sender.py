"""The MRC sender: every EV state transition and the reactions to each feedback signal.

A sender and a receiver are wired back to back (hosts/loopback.py); the test decides
the fate of each packet, so each transition is driven by exactly one signal.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from hosts import protocol, wire
from hosts.config import ConfigError, ProtocolConfig
from hosts.evset import ASSUMED_BAD, DENIED, GOOD, SKIP
from hosts.loopback import Loopback
from hosts.reliability import SenderError
from hosts.sender import Sender

CFG = ProtocolConfig(window=32, ev_count=8, mtu_payload=100, cc=False, ev_min_active=2,
                     tick_s=0.001)


def psn_of(packet) -> int:
    return wire.decode(packet[2])[0].psn


def data_only(packets):
    return [p for p in packets if p[3]]


def earn_back(conn, t: float, until: float = 3.0, step: float = 0.001) -> list[float]:
    """Answer every probe the sender sends from `t` on, `step` later, until a path is
    reinstated; the times the probes went out."""
    sent = []
    while t < until and not conn.kinds("reinstate"):
        for packet in conn.send(t):
            if wire.decode(packet[2])[0].type == protocol.PROBE:
                sent.append(t)
                conn.deliver(packet, t + step)
        t = round(t + step, 6)
    return sent


# ---------------------------------------------------------------------- spraying
def test_spraying_alternates_planes_and_covers_all_evs():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(1600), 0.0)
    out = conn.send()
    assert len(out) == 16
    assert [p for p, _, _, _ in out[:4]] == [0, 1, 0, 1]
    assert len({ev for _, ev, _, _ in out[:8]}) == 8  # one rotation: every active EV
    assert all(wire.decode(d)[0].plane == p for p, _, d, _ in out)


def test_window_limits_packets_in_flight():
    conn = Loopback(ProtocolConfig(window=5, mtu_payload=100, cc=False))
    conn.sender.send_message(0, bytes(2000), 0.0)
    first = conn.send()
    assert len(first) == 5 and conn.send() == []
    conn.deliver(first[0], 0.01)
    assert len(conn.send(0.01)) == 1


def test_clean_transfer_completes_with_a_complete_event():
    conn = Loopback(CFG)
    data = bytes(range(256)) * 4
    conn.sender.send_message(3, data, 0.0)
    for packet in reversed(conn.send()):
        conn.deliver(packet, 0.01)
    assert conn.delivered[3] == data and conn.completed == [3]
    (done,) = conn.kinds("complete")
    assert done["msg_id"] == 3 and done["bytes"] == 1024
    assert not conn.sender.busy and conn.sender.inflight == 0


def test_empty_message_is_one_packet_and_completes():
    conn = Loopback(CFG)
    conn.sender.send_message(0, b"", 0.0)
    (packet,) = conn.send()
    conn.deliver(packet, 0.01)
    assert conn.delivered[0] == b"" and conn.completed == [0]


def test_message_ids_are_unique_per_connection():
    conn = Loopback(CFG)
    conn.sender.send_message(1, b"x", 0.0)
    with pytest.raises(SenderError, match="already used"):
        conn.sender.send_message(1, b"y", 0.0)
    with pytest.raises(SenderError, match="32 bits"):
        conn.sender.send_message(1 << 32, b"y", 0.0)


def test_packet_events_are_opt_in():
    quiet = Loopback(CFG)
    quiet.sender.send_message(0, bytes(100), 0.0)
    quiet.deliver(quiet.send()[0], 0.01)
    assert not quiet.kinds("send") and not quiet.kinds("ack")
    loud = Loopback(ProtocolConfig(mtu_payload=100, cc=False, packet_events=True))
    loud.sender.send_message(0, bytes(100), 0.0)
    loud.deliver(loud.send()[0], 0.01)
    assert loud.kinds("send")[0]["psn"] == 0 and loud.kinds("ack")[0]["psn"] == 0


# ---------------------------------------------------------------------- SKIP
def test_ecn_echo_skips_the_ev_once_and_never_retires():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(200), 0.0)
    first, second = conn.send()
    conn.deliver(first, 0.01, ce=True)
    ev = conn.sender.evs.by_ev[first[1]]
    assert ev.state == SKIP and ev.ecn_marks == 1
    assert conn.kinds("skip")[0]["reason"] == "ecn"
    conn.sender.send_message(1, bytes(800), 0.02)
    evs = [e for _, e, _, _ in conn.send(0.02)]
    assert first[1] not in evs[:7]  # passed over for one rotation
    assert ev.state == GOOD and not conn.kinds("retire")


def test_trimmed_packet_is_nacked_skipped_and_resent_at_once_on_another_ev():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(300), 0.0)
    packets = conn.send()
    conn.deliver(packets[1], 0.01, trimmed=True)
    assert conn.receiver.stats["trimmed_rx"] == 1
    nack = conn.kinds("nack")[0]
    assert nack["psn"] == 1 and nack["reason"] == "TRIMMED"
    assert conn.sender.evs.by_ev[packets[1][1]].state == SKIP
    again = conn.send(0.011)
    assert len(again) == 1 and again[0][1] != packets[1][1]
    hdr = wire.decode(again[0][2])[0]
    assert hdr.psn == 1 and hdr.flags & protocol.F_RETRANSMIT
    for packet in (packets[0], packets[2], again[0]):
        conn.deliver(packet, 0.013)
    assert conn.completed == [0] and not conn.kinds("retire")


def test_last_hop_trim_resends_but_does_not_skip_the_path():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(300), 0.0)
    packets = conn.send()
    conn.deliver(packets[1], 0.01, trimmed=True, last_hop=True)
    assert conn.kinds("nack")[0]["reason"] == "TRIMMED_LASTHOP"
    assert conn.sender.evs.by_ev[packets[1][1]].state == GOOD  # the receiver's port is busy
    assert [psn_of(p) for p in conn.send(0.011)] == [1]


def test_nack_for_an_old_transmission_does_not_resend_twice():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (packet,) = conn.send()
    conn.deliver(packet, 0.01, trimmed=True)
    (again,) = conn.send(0.011)
    conn.deliver(packet, 0.012, trimmed=True)  # a duplicate of the first, trimmed too
    assert conn.send(0.013) == []  # the packet in flight is the retransmission


# ---------------------------------------------------------------------- ASSUMED_BAD
def test_timeout_retires_the_path_and_resends_elsewhere_then_probe_reinstates():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(200), 0.0)
    lost, answered = conn.send()
    conn.deliver(answered, 0.01)  # sent after it: the connection is alive
    ev = conn.sender.evs.by_ev[lost[1]]
    resent = data_only(conn.send(0.3))  # the timer (initial RTO 0.25 s) fires in poll
    assert ev.state == ASSUMED_BAD
    assert conn.kinds("timeout") and conn.kinds("retire")[0]["reason"] == "timeout"
    assert ev.key in conn.sender.evs.bad
    rotation = conn.sender.evs.rotation
    assert all(e.key != ev.key for e in rotation)
    assert sum(e.plane == ev.plane for e in rotation) == CFG.evs_for(2)  # same plane
    assert len(resent) == 1 and resent[0][1] != lost[1]
    conn.deliver(resent[0], 0.35)
    assert conn.completed == [0]
    probes = [p for p in conn.send(0.6) if not p[3]]
    hdr, ctl, _ = wire.decode(probes[0][2])
    assert hdr.type == protocol.PROBE and conn.kinds("probe")
    assert conn.sender.evs.path_key(hdr.ev) == ev.key
    # The path is still down: its first probe goes unanswered (an outage, not a
    # lossy path), and the next one, after twice the wait, is answered.
    t = 0.6
    while True:
        t = round(t + 0.001, 6)
        probes = [p for p in conn.send(t) if not p[3]]
        if probes:
            break
    assert conn.kinds("probe-failed")
    conn.deliver(probes[0], t + 0.01)  # the PROBE_REPLY comes back: one success
    assert ev.state == ASSUMED_BAD and not conn.kinds("reinstate")
    # The path returns after probe_successes replies in a row, spaced apart.
    sent = [t] + earn_back(conn, round(t + 0.011, 6))
    assert len(sent) == CFG.probe_successes
    assert min(b - a for a, b in zip(sent, sent[1:])) >= CFG.probe_spacing_s
    assert ev.state == GOOD and conn.kinds("reinstate")
    assert not conn.sender.evs.bad and not conn.sender.busy


def test_a_timeout_while_the_connection_is_silent_holds_the_path_until_it_is_heard():
    # Nothing sent after the packet is acknowledged, on any path: a stalled receiver
    # looks the same to every path, so the timeout retires none. The packet goes out
    # again elsewhere and its path is held and probed; the verdict waits while the
    # silence lasts, and comes once something sent since is acknowledged.
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (lost,) = conn.send()
    ev = conn.sender.evs.by_ev[lost[1]]
    out = conn.send(0.3)  # the timer (initial RTO 0.25 s) fires in poll
    (timeout,) = conn.kinds("timeout")
    assert timeout["silent"] and conn.sender.stats["silent_timeouts"] == 1
    assert conn.kinds("suspect")[0]["reason"] == "timeout" and not conn.kinds("retire")
    assert ev.key in conn.sender.evs.held
    (resent,) = [p for p in out if p[3] == protocol.TRIMMABLE_RETX]
    assert resent[1] != lost[1] and probes_of(out)[0][1] == lost[1]
    for t in (0.31, 0.4, 0.5):  # silence: the probe's deadlines pass, no verdict
        conn.send(t)
        assert not conn.kinds("retire") and ev.key in conn.sender.evs.held
    conn.deliver(resent, 0.51)  # heard: the resend, sent after the path was held
    t = 0.51
    while not conn.kinds("retire") and t < 1.5:
        t = round(t + 0.001, 6)
        conn.send(t)
    assert conn.kinds("retire")[0]["reason"] == "timeout" and ev.state == ASSUMED_BAD


def test_a_stalled_receiver_that_answers_late_clears_the_held_path():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (late,) = conn.send()
    out = conn.send(0.3)  # silent timeout: held and probed
    ev = conn.sender.evs.by_ev[late[1]]
    conn.send(0.6)
    # The receiver wakes up and takes in its backlog: the packet, then the probe.
    conn.deliver(late, 0.61)
    conn.deliver(probes_of(out)[0], 0.61)
    assert conn.sender.stats["late_cleared"] == 1 and ev.key not in conn.sender.evs.held
    conn.send(1.0)
    assert not conn.kinds("retire") and ev.state != ASSUMED_BAD and conn.completed == [0]


def test_probes_back_off_while_the_path_stays_dead():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(200), 0.0)
    conn.deliver(conn.send()[1], 0.001)
    (resent,) = data_only(conn.send(0.3))  # retired at 0.3
    conn.deliver(resent, 0.301)  # only the one path is bad
    times = []
    t = 0.3
    while t < 2.5:
        t += 0.001
        if [p for p in conn.sender.poll(t) if not p[3]]:
            times.append(round(t - 0.3, 3))
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert times[0] == pytest.approx(0.05, abs=0.002)
    assert gaps[:3] == pytest.approx([0.1, 0.2, 0.4], abs=0.003)
    assert max(gaps) == pytest.approx(CFG.probe_max_s, abs=0.003)


def test_no_probes_when_turned_off():
    conn = Loopback(ProtocolConfig(ev_count=8, mtu_payload=100, cc=False, probes=False))
    conn.sender.send_message(0, bytes(200), 0.0)
    conn.deliver(conn.send()[1], 0.001)
    conn.send(0.3)
    assert conn.kinds("retire") and not [p for p in conn.send(1.0) if not p[3]]


def test_gap_beyond_reorder_tolerance_on_one_ev_is_a_loss():
    conn = Loopback(ProtocolConfig(window=64, ev_count=2, mtu_payload=100, cc=False,
                                   ev_min_active=1), planes=2, paths=1)
    conn.sender.send_message(0, bytes(1000), 0.0)
    plane0 = [p for p in conn.send() if p[0] == 0]
    conn.deliver(plane0[1], 0.01)
    conn.deliver(plane0[2], 0.01)
    assert not conn.kinds("retire")  # within the reordering tolerance
    conn.deliver(plane0[3], 0.01)
    retire = conn.kinds("retire")[0]
    assert retire["reason"] == "gap" and retire["plane"] == 0
    # The passed packet and everything else in flight on the path go out again.
    assert psn_of(plane0[0]) in {psn_of(p) for p in conn.send(0.011)}


def test_a_packet_resent_on_the_same_ev_is_not_passed_by_acks_of_older_packets():
    # One EV: a trimmed packet is resent on it after later packets were sent; their
    # acks pass its first transmission, not its resend, so nothing is lost.
    conn = Loopback(ProtocolConfig(window=64, ev_count=1, mtu_payload=100, cc=False,
                                   ev_min_active=0), planes=1, paths=1)
    conn.sender.send_message(0, bytes(600), 0.0)
    first = conn.send(0.0)
    conn.deliver(first[0], 0.001, trimmed=True)
    assert conn.send(0.002) == []  # the EV is skipped once
    (resend,) = conn.send(0.0025)
    assert psn_of(resend) == psn_of(first[0])
    for packet in first[1:]:
        conn.deliver(packet, 0.003)
    assert not conn.kinds("retire") and conn.sender.stats["losses"] == 0
    conn.deliver(resend, 0.004)
    assert conn.completed == [0]


def test_acks_of_first_transmissions_of_timed_out_packets_pass_nothing_on_their_new_ev():
    # A timeout fires on packets that were only queued: they are resent on the other
    # plane, behind packets still on their way there. Then the first transmissions
    # arrive; their acks may answer either transmission, so they pass nothing.
    # (rto_initial_s as low as rto_min_s: the timeout of the unmeasured path fires
    # on the srtt-based schedule this test is about.)
    conn = Loopback(ProtocolConfig(window=64, ev_count=2, mtu_payload=100, cc=False,
                                   ev_min_active=1, rto_initial_s=0.05), planes=2, paths=1)
    conn.sender.send_message(0, bytes(200), 0.0)
    queued, answered = conn.send(0.0)
    conn.deliver(answered, 0.01)
    conn.sender.send_message(1, bytes(400), 0.02)
    later = conn.send(0.02)
    originals = [queued] + [p for p in later if p[0] == 0]
    on_their_way = [p for p in later if p[0] == 1]
    resent = data_only(conn.send(0.055))  # the first packet's timeout (srtt 10 ms)
    assert {e["reason"] for e in conn.kinds("retire")} == {"timeout"}
    assert {psn_of(p) for p in resent} == {psn_of(p) for p in originals}
    assert {p[0] for p in resent} == {1}
    for packet in originals:
        conn.deliver(packet, 0.056)
    assert conn.sender.stats["losses"] == 0
    assert {e["reason"] for e in conn.kinds("retire")} == {"timeout"}
    for packet in on_their_way + resent:
        conn.deliver(packet, 0.057)
    assert conn.completed == [0, 1] and conn.sender.stats["losses"] == 0


def probes_of(out: list) -> list:
    """The PROBE packets among what a poll sent."""
    return [p for p in out if wire.decode(p[2])[0].type == protocol.PROBE]


def test_packet_sent_well_before_one_acked_elsewhere_is_late():
    conn = Loopback(CFG)
    sender = conn.sender
    conn.sender.send_message(0, bytes(100), 0.0)
    (stuck,) = conn.send(0.0)
    conn.sender.send_message(1, bytes(100), 0.05)
    (fresh,) = conn.send(0.05)
    conn.deliver(fresh, 0.06)  # srtt 10 ms: the 50 ms older packet is beyond reordering
    out = conn.send(0.062)
    # Late, not yet lost: sent again elsewhere at once, its path held and probed.
    (suspect,) = conn.kinds("suspect")
    assert suspect["reason"] == "late" and suspect["ev"] == stuck[1]
    assert not conn.kinds("retire")
    held = sender.evs.by_ev[stuck[1]]
    assert held.state == SKIP and held.key in sender.evs.held
    (probe,) = probes_of(out)
    assert probe[1] == stuck[1]
    # It asks about the stuck packet, and goes in the data queue, behind it.
    assert probe[3] == protocol.SUSPECT_PROBE_CLASS
    assert protocol.CLASS_BEHAVIOUR[probe[3]] == protocol.BEHAVIOUR_BEST_EFFORT
    probe_hdr = wire.decode(probe[2])[0]
    assert probe_hdr.psn & protocol.SUSPECT_SEQ
    assert probe_hdr.path_seq == wire.decode(stuck[2])[0].path_seq
    resent = [p for p in out if p[3] == protocol.TRIMMABLE_RETX]
    assert len(resent) == 1 and resent[0][1] != stuck[1]
    conn.deliver(resent[0], 0.065)  # the connection is alive since the path was held
    # No answer to the probe within the path's srtt + 4 rttvar: retired, as lost.
    conn.send(0.062 + 0.010 + 4 * 0.005 + 0.001)
    assert conn.kinds("retire")[0]["reason"] == "late"
    assert held.state == ASSUMED_BAD and held.key not in sender.evs.held


def burst_with_one_lost(lost_index: int):
    """Four packets sent at once at time 0, every one but `lost_index` answered 10 ms
    later: (connection, the lost packet)."""
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(400), 0.0)
    out = conn.send(0.0)
    lost = out[lost_index]
    for packet in out:
        if packet is not lost:
            conn.deliver(packet, 0.01)
    return conn, lost


def first_suspect(conn, until: float = 0.5) -> tuple[float, list]:
    """Step the sender by a millisecond until a path is held: the time, and what the
    sender sent then."""
    t, out = 0.01, []
    while not conn.kinds("suspect") and t < until:
        t = round(t + 0.001, 6)
        out = conn.send(t)
    return t, out


def test_a_packet_its_burst_overtook_is_late_a_round_trip_and_the_window_after_it_left():
    # Sent together, so no acknowledged packet left a reordering window after it: RACK's
    # timer finds it (srtt + 2 srtt + 4 rttvar, 50 ms), not the timeout of a path with
    # no RTT sample of its own (rto_initial_s, 250 ms).
    conn, lost = burst_with_one_lost(0)
    t, _ = first_suspect(conn)
    (suspect,) = conn.kinds("suspect")
    assert suspect["reason"] == "late" and suspect["ev"] == lost[1]
    assert 0.04 < t < 0.08 < CFG.rto_initial_s
    assert conn.sender.stats["tail_probes"] == 0


def test_a_lost_tail_is_sent_again_once_by_a_tail_loss_probe():
    # The last packet of the burst: nothing sent after it is answered, so only a probe
    # of the tail finds it, a round trip and the window after it left; it goes once
    # until an ack answers something sent later.
    conn, lost = burst_with_one_lost(-1)
    t, _ = first_suspect(conn)
    (suspect,) = conn.kinds("suspect")
    assert suspect["reason"] == "tail" and suspect["ev"] == lost[1]
    assert 0.04 < t < 0.08
    for step in range(300):  # the copy and the probe are lost too: no second tail probe
        conn.send(round(t + 0.001 * (step + 1), 6))
    tails = [e for e in conn.kinds("suspect") if e["reason"] == "tail"]
    assert conn.sender.stats["tail_probes"] == 1 and len(tails) == 1


def test_a_tail_probe_copy_that_lands_completes_the_message():
    conn, lost = burst_with_one_lost(-1)
    t, out = first_suspect(conn)
    resent = [p for p in out if p[3] == protocol.TRIMMABLE_RETX]
    assert len(resent) == 1 and resent[0][1] != lost[1]
    conn.deliver(resent[0], t + 0.01)
    assert conn.kinds("complete")


def test_a_held_path_that_was_the_last_in_use_takes_its_copy_unjudged():
    # Every EV on one path: holding it leaves the copy of its late packet nowhere to go,
    # so the connection stays silent and the probe's silence proves nothing. At the
    # verdict's time the path takes packets again, unjudged, instead of waiting forever.
    conn = Loopback(replace(CFG, pin_path=(0, 0)))
    conn.sender.send_message(0, bytes(100), 0.0)
    (first,) = conn.send(0.0)
    conn.deliver(first, 0.01)
    conn.sender.send_message(1, bytes(100), 0.02)
    (lost,) = conn.send(0.02)
    t, out = first_suspect(conn)
    assert not [p for p in out if p[3] == protocol.TRIMMABLE_RETX]  # stranded
    resent = []
    while not resent and t < 0.3:
        t = round(t + 0.001, 6)
        resent = [p for p in conn.send(t) if p[3] == protocol.TRIMMABLE_RETX]
    assert resent and conn.sender.evs.by_ev[resent[0][1]].key == (0, 0)
    assert not conn.kinds("retire") and not conn.sender.suspects
    conn.deliver(resent[0], t + 0.01)
    assert conn.kinds("complete")[-1]["msg_id"] == 1


def test_a_late_packet_whose_path_answers_its_probe_retires_nothing():
    conn = Loopback(CFG)
    sender = conn.sender
    sender.send_message(0, bytes(100), 0.0)
    (stuck,) = conn.send(0.0)
    sender.send_message(1, bytes(100), 0.05)
    (fresh,) = conn.send(0.05)
    conn.deliver(fresh, 0.06)
    (probe,) = probes_of(conn.send(0.062))
    conn.deliver(stuck, 0.063)  # only held up in a queue: it arrives before the probe
    conn.deliver(probe, 0.064)
    (cleared,) = conn.kinds("suspect-cleared")
    assert cleared["ev"] == stuck[1]
    path = sender.evs.by_ev[stuck[1]].key
    assert path not in sender.evs.held and path not in sender.evs.bad
    conn.send(1.0)
    assert not conn.kinds("retire") and sender.stats["late_cleared"] == 1


def first_out() -> tuple[Loopback, object, tuple, tuple]:
    """A connection that has sent one packet at time 0: (connection, its sender, the
    packet, the packet's path)."""
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (pkt,) = conn.send(0.0)
    return conn, conn.sender, pkt, conn.sender.evs.by_ev[pkt[1]].key


def test_a_probe_that_passed_where_the_late_packet_should_have_been_retires_its_path():
    # A path with few packets (many paths, one loss in five): nothing later of its own
    # has arrived when the late check fires, so only the probe can tell. It comes in
    # behind where the packet would be, and the receiver has not seen the packet.
    conn, sender, first, path = first_out()
    conn.deliver(first, 0.01)  # the path has delivered before: srtt 10 ms
    t, msg_id = 0.02, 1
    while True:  # other paths deliver at once; the first packet on `path` is lost
        sender.send_message(msg_id, bytes(100), t)
        (pkt,) = conn.send(t)
        msg_id += 1
        if sender.evs.by_ev[pkt[1]].key == path:
            break
        conn.deliver(pkt, t + 0.0005)
        t = round(t + 0.001, 6)
    lost_path_seq = wire.decode(pkt[2])[0].path_seq
    # Nothing sent since: past a round trip and the reordering window, the tail-loss
    # probe holds the path and asks about the packet.
    t = round(t + 0.05, 6)
    (probe,) = probes_of(conn.send(t))
    assert wire.decode(probe[2])[0].path_seq == lost_path_seq
    assert [e["path"] for e in conn.kinds("suspect")] == [path[1]]
    assert not conn.kinds("retire")
    conn.deliver(probe, t + 0.002)
    assert sender.stats["late_cleared"] == 0
    (retire, *_) = conn.kinds("retire")
    assert (retire["plane"], retire["path"]) == path and retire["reason"] == "tail"
    assert path not in sender.evs.held


def send_until_on(conn: Loopback, path, t: float, msg_id: int):
    """Send one-packet messages from `t` on, a millisecond apart, none delivered, until
    one goes on `path`; returns it and the time it left."""
    sender = conn.sender
    while True:
        sender.send_message(msg_id, bytes(100), t)
        (pkt,) = conn.send(t)
        if sender.evs.by_ev[pkt[1]].key == path:
            return pkt, t
        msg_id += 1
        t = round(t + 0.001, 6)


def test_a_late_packet_passed_on_its_own_path_is_lost_at_once():
    # A path's packets share every queue, in order: a later one of the same path that
    # arrived says the late one was lost, not held up. No probe is waited for.
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (stuck,) = conn.send(0.0)
    path = conn.sender.evs.by_ev[stuck[1]].key
    later, t = send_until_on(conn, path, 0.05, 1)
    conn.deliver(later, t + 0.01)
    conn.send(t + 0.012)
    (retire, *_) = conn.kinds("retire")
    assert retire["reason"] == "late" and (retire["plane"], retire["path"]) == path
    assert not [e for e in conn.kinds("suspect") if (e["plane"], e["path"]) == path]


def test_a_held_path_that_delivers_a_later_packet_but_not_the_late_one_is_retired():
    conn, sender, stuck, path = first_out()
    sibling, t = send_until_on(conn, next(k for k in sender.evs.by_ev.values()
                                          if k.key != path).key, 0.05, 1)
    later, t_later = send_until_on(conn, path, round(t + 0.001, 6), 100)
    conn.deliver(sibling, t_later + 0.005)
    conn.send(t_later + 0.006)  # the stuck packet is late: its path held and probed
    assert [e["ev"] for e in conn.kinds("suspect")] == [stuck[1]]
    assert not conn.kinds("retire")
    conn.deliver(later, t_later + 0.008)  # sent after it on its path, before the hold
    (retire, *_) = conn.kinds("retire")
    assert (retire["plane"], retire["path"]) == path and retire["reason"] == "late"


def run_two_paths(dead_from: float, slow_path_rtt: float = 0.001, until: float = 0.03):
    """One plane, two spines: a packet every 0.5 ms, alternately on each path. Path 0
    answers after 1 ms; path 1 after `slow_path_rtt`, and not at all from `dead_from`.
    Returns the connection."""
    conn = Loopback(ProtocolConfig(window=64, ev_count=4, mtu_payload=100, cc=False,
                                   tick_s=0.001, ev_min_active=1), planes=1, paths=2)
    conn.sender.send_message(0, bytes(100 * 200), 0.0)
    arrivals = []
    t = 0.0
    while t < until and not conn.kinds("retire"):
        for packet in conn.send(t, budget=1):
            if not packet[3]:
                continue
            path = conn.sender.evs.by_ev[packet[1]].key[1]
            if path == 0:
                arrivals.append((t + 0.001, packet))
            elif t < dead_from:
                arrivals.append((t + slow_path_rtt, packet))
        t = round(t + 0.0005, 6)
        for at, packet in sorted(a for a in arrivals if a[0] <= t):
            conn.deliver(packet, at)
        arrivals = [a for a in arrivals if a[0] > t]
    return conn


def test_a_dead_spine_is_found_within_three_round_trips_by_its_sibling_acks():
    conn = run_two_paths(dead_from=0.010)
    suspect = conn.kinds("suspect")[0]
    assert suspect["reason"] == "late-in-plane" and suspect["path"] == 1
    # The first packet into the dead path left at 10 ms or just after; RTT 1 ms (the
    # retransmission timeout would take 50 ms, the cross-plane check several RTTs):
    # sent again and the path held then, retired when its probe finds no answer
    # within the path's srtt + max(4 rttvar, two timer ticks).
    assert 0.010 < suspect["t"] < 0.0131
    retire = conn.kinds("retire")[0]
    assert retire["reason"] == "late-in-plane" and retire["path"] == 1
    assert suspect["t"] < retire["t"] <= suspect["t"] + 0.001 + 0.002 + 0.001


def test_a_slower_spine_of_the_plane_is_not_taken_for_a_dead_one():
    conn = run_two_paths(dead_from=1.0, slow_path_rtt=0.004, until=0.1)
    assert not conn.kinds("retire") and conn.sender.stats["losses"] == 0


def test_a_packet_passed_in_its_plane_is_declared_lost_by_the_reordering_timer():
    """The sibling's ack comes before the dead packet is older than its path's
    srtt + 4 rttvar: no loss then, but the plane's timer fires when it is, with no
    further ack and long before the next tick."""
    conn = Loopback(ProtocolConfig(window=64, ev_count=2, mtu_payload=100, cc=False,
                                   tick_s=1.0, ev_min_active=1), planes=1, paths=2)
    sender = conn.sender
    sender.send_message(0, bytes(100 * 100), 0.0)
    t = 0.0
    for _ in range(20):  # steady RTT of 1 ms on both paths: a tight bound
        for packet in conn.send(t, budget=2):
            conn.deliver(packet, t + 0.001)
        t += 0.002
    (dead,) = conn.send(t, budget=1)
    (sibling,) = conn.send(t + 0.0002, budget=1)
    dead_path = sender.evs.by_ev[dead[1]].key
    assert sender.evs.by_ev[sibling[1]].key != dead_path
    conn.deliver(sibling, t + 0.0005)  # a fast sibling: the dead one is not late yet
    # The plane's check waits for the agent's next poll, after the receive batch.
    assert sender.timer_at(t + 0.0005) == t + 0.0005
    conn.send(t + 0.0005, budget=0)
    assert not conn.kinds("retire")
    due = sender.timer_at(t + 0.0005)
    assert t + 0.001 < due < t + 0.0013  # sent at t, bound a little over 1 ms
    assert not conn.kinds("retire")
    conn.send(due, budget=0)
    (suspect,) = conn.kinds("suspect")
    assert suspect["reason"] == "late-in-plane" and suspect["t"] == due
    assert not conn.kinds("retire")
    (resent,) = data_only(conn.send(due, budget=1))  # sent again on the sibling path
    conn.deliver(resent, due + 0.001)  # the connection is alive since the path was held
    conn.send(due + 2.5, budget=0)  # the probe's answer never came (ticks of 1 s)
    (retire, *_) = conn.kinds("retire")
    assert retire["reason"] == "late-in-plane"
    assert sender.evs.by_ev[dead[1]].state == ASSUMED_BAD


def test_repeated_and_overlapping_sacks_acknowledge_each_packet_once():
    rng = random.Random(5)
    for _ in range(20):
        conn = Loopback(ProtocolConfig(window=64, mtu_payload=100, cc=False))
        conn.sender.send_message(0, bytes(100 * 40), 0.0)
        packets = conn.send()
        rng.shuffle(packets)
        answers = []
        for packet in packets:
            answers.append(conn.answer(packet, 0.01))
            if rng.random() < 0.5:  # answers arrive late, repeated and out of order
                continue
            for answer in rng.sample(answers, min(3, len(answers))):
                conn.sender.on_packet(*wire.decode(answer)[:2], 0.02)
        for answer in answers:
            conn.sender.on_packet(*wire.decode(answer)[:2], 0.03)
        sender = conn.sender
        assert sender.stats["acked"] == 40 and conn.completed == [0]
        assert sender.cum_acked == 40 and sender.acked_above == 0 and not sender.packets


def test_retransmission_timeout_doubles():
    sender = Loopback(CFG).sender
    assert sender.rto(0) == CFG.rto_initial_s
    sender.srtt, sender.rttvar = 0.02, 0.005
    assert [sender.rto(r) for r in range(3)] == pytest.approx([0.05, 0.1, 0.2])
    assert sender.rto(10) == CFG.rto_max_s


def test_min_active_floor_stops_retiring_everything():
    conn = Loopback(ProtocolConfig(window=64, ev_count=2, mtu_payload=100, cc=False,
                                   ev_min_active=2), planes=2, paths=1)
    conn.sender.send_message(0, bytes(300), 0.0)
    first, second, third = conn.send()
    conn.deliver(third, 0.001)  # the connection is alive: the timeouts blame the paths
    resent = data_only(conn.send(0.3))
    assert not conn.kinds("retire") and conn.kinds("retire-suppressed")
    assert all(e.state == GOOD for e in conn.sender.evs.rotation)
    assert len(resent) == 2  # still resent, on the floor's EVs


# ---------------------------------------------------------------------- DENIED
def test_denied_ev_is_never_used():
    conn = Loopback(CFG)
    denied = conn.sender.evs.rotation[0]
    conn.sender.deny_ev(denied.ev, 0.0)
    assert denied.state == DENIED and conn.kinds("deny")
    conn.sender.send_message(0, bytes(3200), 0.0)
    assert denied.ev not in {ev for _, ev, _, _ in conn.send()}


def test_denying_an_ev_in_use_resends_its_packets():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (packet,) = conn.send()
    conn.sender.deny_ev(packet[1], 0.001)
    (again,) = conn.send(0.002)
    assert again[1] != packet[1] and psn_of(again) == 0


# ---------------------------------------------------------------------- planes
def test_local_plane_down_and_up():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(400), 0.0)
    before = conn.send()
    conn.sender.set_local_plane(1, False, 0.01)
    down = conn.kinds("plane-down")[0]
    assert down["plane"] == 1 and down["local_up"] is False
    # What was in flight on plane 1 goes out again on plane 0, at once.
    resent = conn.send(0.01)
    assert {p[0] for p in resent} == {0}
    assert {psn_of(p) for p in resent} == {psn_of(p) for p in before if p[0] == 1}
    conn.sender.send_message(1, bytes(800), 0.02)
    assert {p for p, _, _, _ in conn.send(0.02)} == {0}
    assert conn.sender.port_state() == 0b01
    conn.sender.set_local_plane(1, True, 0.1)
    assert conn.kinds("plane-up")
    conn.sender.send_message(2, bytes(800), 0.1)
    # Back in use; and preferred while plane 0's EVs still have packets in flight.
    assert {p for p, _, _, _ in conn.send(0.1)} == {1}


def test_remote_port_state_takes_the_plane_out_and_back():
    conn = Loopback(CFG)
    conn.port_state = 0b10  # the peer lost its plane-0 port; its next answer says so
    conn.sender.send_message(0, bytes(100), 0.0)
    conn.deliver(conn.send()[0], 0.01)
    assert conn.kinds("plane-down")[0]["remote_up"] is False
    conn.sender.send_message(1, bytes(800), 0.02)
    assert {p for p, _, _, _ in data_only(conn.send(0.02))} == {1}
    conn.sender.remote_ports(0b11, 0.1)
    assert conn.kinds("plane-up")
    conn.sender.send_message(2, bytes(800), 0.1)
    assert 0 in {p for p, _, _, _ in data_only(conn.send(0.1))}


def test_plane_status_packet_is_understood():
    conn = Loopback(CFG)
    ctl = wire.Control(0, 0, 0, 0, 0, 0b01)
    status = wire.encode_control(protocol.PLANE_STATUS, 0, 0, 0, 7, 0, 0, 0, ctl)
    conn.sender.on_packet(*wire.decode(status)[:2], 0.0)
    assert conn.sender.evs.plane_up == [True, False]


def test_a_remotely_down_plane_is_probed_so_a_lost_plane_status_does_not_strand_it():
    conn = Loopback(CFG)
    conn.sender.remote_ports(0b01, 0.0)  # peer: plane 1 down
    assert conn.sender.busy
    probes = [p for p in conn.send(0.06) if not p[3]]
    assert len(probes) == 1 and probes[0][0] == 1
    assert conn.kinds("probe")[0]["reason"] == "remote-plane"
    conn.deliver(probes[0], 0.07)  # the port is back: the reply carries port_state 0b11
    assert conn.sender.evs.plane_up == [True, True] and conn.kinds("plane-up")


def test_plane_down_locally_stops_probing_it():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(100), 0.0)
    (lost,) = conn.send()
    conn.send(0.3)  # retired
    conn.sender.set_local_plane(lost[0], False, 0.31)
    assert not [p for p in conn.send(1.0) if not p[3]]


# ---------------------------------------------------------------------- robustness
def test_a_forged_sack_cannot_stall_the_sender_or_ack_unsent_packets():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(300), 0.0)
    conn.send()
    ctl = wire.Control(0xFFFFFFFF, 0xFFFFFF00, (1 << 64) - 1, 0, 0, 0b11)
    forged = wire.encode_control(protocol.SACK, 0, 0, 0, 7, 0, 0, 0xFFFFFFF0, ctl)
    conn.sender.on_packet(*wire.decode(forged)[:2], 0.01)
    assert conn.sender.cum_acked == conn.sender.next_psn == 3


def test_sender_with_default_config_draws_the_automatic_size():
    sender = Sender(0, 1, 1, 2, 3, ProtocolConfig(), lambda e: None, lambda *a: None)
    assert len(sender.evs.rotation) == 2 * ProtocolConfig().evs_for(planes=2) == 2 * 8
    assert sender.ev_table()[0]["state"] == GOOD


# ---------------------------------------------------------------------- config
@pytest.mark.parametrize("value", [{"window": 8}, {}])
def test_config_overrides(value):
    assert ProtocolConfig.with_overrides(value).window == value.get("window", 64)


@pytest.mark.parametrize("overrides,match", [
    ({"windw": 3}, "protocol.windw: unknown setting"),
    ({"window": 0}, "protocol.window: must be at least 1"),
    ({"window": "8"}, "protocol.window: must be int"),
    ({"probes": 1}, "protocol.probes: must be bool"),
    ({"rto_min_s": 0}, "protocol.rto_min_s: must be a positive"),
    ({"mtu_payload": 70000}, "protocol.mtu_payload"),
    ({"rto_min_s": 2.0}, "protocol.rto_max_s"),
])
def test_config_rejects_bad_settings(overrides, match):
    with pytest.raises(ConfigError, match=match):
        ProtocolConfig.with_overrides(overrides)


def test_a_plane_down_at_the_peer_with_every_path_bad_is_still_probed():
    conn = Loopback(ProtocolConfig(ev_count=2, mtu_payload=100, cc=False, ev_min_active=1),
                   planes=2, paths=1)
    conn.sender.send_message(0, bytes(200), 0.0)
    lost, answered = conn.send()
    conn.deliver(answered, 0.01)
    resent = data_only(conn.send(0.3))  # plane lost[0]'s only path retired
    conn.deliver(resent[0], 0.31)
    dead = lost[0]
    conn.sender.remote_ports(0b11 & ~(1 << dead), 0.32)  # and the peer reports it down
    probes = [p for p in conn.send(0.4) if not p[3]]
    assert [p[0] for p in probes] == [dead]
    conn.deliver(probes[0], 0.41)  # back: the plane up at once, and the path...
    assert conn.sender.evs.plane_up == [True, True] and conn.sender.evs.bad
    earn_back(conn, 0.411)  # ... once its probes have earned it
    assert not conn.sender.evs.bad


def test_the_event_loop_is_never_told_to_wait_for_a_plane_without_evs():
    conn = Loopback(ProtocolConfig(ev_count=2, mtu_payload=100, cc=False, ev_min_active=1),
                   planes=2, paths=1)
    assert conn.sender.wanted_planes() == [0, 1]
    conn.sender.send_message(0, bytes(200), 0.0)
    lost, answered = conn.send()
    conn.deliver(answered, 0.01)
    conn.send(0.3)  # its plane's only path is retired
    assert conn.sender.wanted_planes() == [1 - lost[0]]
    conn.sender.set_local_plane(1 - lost[0], False, 0.31)
    assert conn.sender.wanted_planes() == []
    assert conn.sender.evs.pick(lambda p: True) is None


def test_a_sack_cannot_acknowledge_packets_never_sent():
    conn = Loopback(ProtocolConfig(window=2, mtu_payload=100, cc=False))
    conn.sender.send_message(0, bytes(500), 0.0)
    first = conn.send()
    for packet in first:
        conn.deliver(packet, 0.005)
    conn.send(0.005)  # PSNs 2 and 3 go out, unanswered so far
    ctl = wire.Control(5, 5, 0b111, 0, 0, 0b11)
    forged = wire.encode_control(protocol.SACK, 0, 0, 0, 7, 0, 0, 4, ctl)
    conn.sender.on_packet(*wire.decode(forged)[:2], 0.01)
    assert conn.sender.cum_acked == 4 and not conn.completed  # only what was sent
    assert 4 in conn.sender.packets or conn.sender.unsent  # PSN 4 still to be sent
    t = 0.02
    while not conn.completed and t < 1:
        for packet in conn.send(t):
            if psn_of(packet) == 4:
                conn.deliver(packet, t)
        t += 0.01
    assert conn.completed == [0] and conn.receiver.above == {4}  # 4 really went out


def test_queueing_a_large_message_is_cheap():
    sender = Loopback(CFG).sender
    sender.send_message(0, bytes(50_000_000), 0.0)  # 500,000 packets of 100 bytes
    assert len(sender.packets) == 0 and sender.busy and sender.has_work()
    assert len(sender.poll(0.0, budget=10)) == 10 and len(sender.packets) == 10


def test_timers_are_never_shorter_than_the_queues_they_must_see_through():
    from hosts.endpoint import Endpoint
    from topologies.model import load_topology, with_rate_cap

    def floor(fabric) -> ProtocolConfig:
        endpoint = Endpoint(0, fabric, "mrc", ProtocolConfig(), lambda e: None,
                            lambda *a: None, lambda *a: None)
        return endpoint.config

    fabric = load_topology("2tier-2plane")  # 64 frames at 20 Mbit/s drain in 33 ms
    frame_bits = protocol.DATA_FRAME_BYTES * 8
    # By default the floor is that drain at any rate (the same round trips when capped).
    assert floor(fabric).rto_min_s == pytest.approx(64 * frame_bits / 20e6)
    slow = with_rate_cap(fabric, 2.5)  # its queue, as many BDPs, at 2.5 Mbit/s
    assert floor(slow).rto_min_s == pytest.approx(
        slow.spec.host_t0.queue_pkts * protocol.DATA_FRAME_BYTES * 8 / 2.5e6)
    # NSCC's delay ceiling stays above the ECN threshold's queue (and its default).
    frame_bits = protocol.DATA_FRAME_BYTES * 8
    for net, rate in ((fabric, 20e6), (slow, 2.5e6)):
        queue_s = net.spec.ecn_threshold_pkts * frame_bits / rate
        assert floor(net).nscc_qa_delay_s == pytest.approx(
            max(queue_s, ProtocolConfig().nscc_qa_delay_s))
    # Reverse-EV probes: 50 ms down to 2.5 Mbit/s, then ten frame times of the link.
    assert floor(fabric).reverse_probe_s == floor(slow).reverse_probe_s == 0.05
    bmv2 = with_rate_cap(fabric, 0.43)  # BMv2's CPU-safe rate on 2tier-8plane here
    assert floor(bmv2).reverse_probe_s == pytest.approx(10 * frame_bits / 0.43e6)  # 282 ms
    asked = Endpoint(0, bmv2, "mrc", ProtocolConfig(reverse_probe_s=0.02), lambda e: None,
                     lambda *a: None, lambda *a: None).config
    assert asked.reverse_probe_s == 0.02  # a scenario's own interval is kept
    # At 0.43 Mbit/s a full queue (as many BDPs as ever) drains in most of a second; a
    # drain past rto_max_s would raise the ceiling too.
    drain = bmv2.spec.host_t0.queue_pkts * frame_bits / 0.43e6
    assert floor(bmv2).rto_min_s == pytest.approx(drain)
    assert floor(bmv2).rto_max_s == pytest.approx(max(drain, ProtocolConfig().rto_max_s))
    assert floor(slow).rto_max_s == ProtocolConfig().rto_max_s
    # The timeout of a path with no RTT sample: by default the fabric's worst round trip
    # (three full data queues and four links each way) at any rate; a scenario's own
    # value is only raised to it.
    for net, rate in ((fabric, 20e6), (slow, 2.5e6), (bmv2, 0.43e6)):
        worst = 3 * net.spec.host_t0.queue_pkts * frame_bits / rate + 0.004
        assert floor(net).rto_initial_s == pytest.approx(worst)
