"""The baseline with one queue pair (`single-path`, `roce`): the path the switches' ECMP
hash gives its flow, go-back-N on timeout and on NACK, moves only when routing says so
(tests/unit/test_reroute.py), and moves to the error state past its retry limit."""

from __future__ import annotations

import pytest

from hosts import protocol, wire
from hosts.baseline import RoceSender
from hosts.config import ProtocolConfig
from hosts.receiver import Receiver
from hosts.reliability import SenderError
from hosts.simnet import Chaos, Outage, SimNet
from topologies.model import load_topology
from topologies.paths import path_for_ev

CFG = ProtocolConfig(window=8, mtu_payload=100, cc=False, reconvergence_s=1.0,
                     rto_min_s=0.05, rto_max_s=0.1)
FABRIC = load_topology("2tier-2plane")


def sender(events=None, cfg=CFG, me=0, peer=3, **kwargs):
    return RoceSender(me, peer, 9, FABRIC, cfg, (events if events is not None else []).append,
                      lambda *a: None, **kwargs)


def path_of(s) -> tuple[int, int | None]:
    path = path_for_ev(FABRIC, s.me, s.peer, s.ev)
    return path.plane, path.spine


def psns(out):
    return [wire.decode(p[2])[0].psn for p in out]


def test_one_hashed_path_per_flow_and_in_order_window():
    s = sender()
    assert s.ev == sender().ev  # the hash is stable
    assert len({path_of(sender(me=a, peer=b)) for a in (0, 1) for b in (2, 3)}) > 1
    s.send_message(0, bytes(1000), 0.0)
    out = s.poll(0.0)
    assert psns(out) == list(range(8)) and {p[1] for p in out} == {s.ev}


def test_go_back_n_on_timeout_from_the_oldest_unacked_packet():
    s = sender()
    s.send_message(0, bytes(500), 0.0)
    s.poll(0.0)
    ack = wire.Control(2, 2, 0, s.ev, 0, 3)
    s.on_sack(wire.Header(protocol.SACK, 0, 0, 0, 9, s.ev, 0, 1, 0, 0, 0), ack, 0.01)
    assert s.poll(0.02) == []
    again = s.poll(0.2)
    assert psns(again) == [2, 3, 4]
    assert all(wire.decode(p[2])[0].flags & protocol.F_RETRANSMIT for p in again)


def test_without_word_from_routing_the_flow_stays_on_its_path_whatever_the_timeouts():
    events = []
    s = sender(events)
    first_ev = s.ev
    s.send_message(0, bytes(500), 0.0)
    for i in range(300):
        s.poll(i * 0.01)
    assert s.ev == first_ev and s.stats["timeouts"] >= 5 and s.stats["reroutes"] == 0


def test_after_routing_moves_the_flow_everything_is_resent_at_once_on_the_new_path():
    s = sender()
    s.send_message(0, bytes(500), 0.0)
    s.poll(0.0)
    plane, spine = path_of(s)
    s.routes.event("remote-down", [(3, plane, spine)], 0.01)
    for t in (0.2, 0.5, 0.9):  # routing has not reconverged: timeouts on the old path
        assert {p[1] for p in s.poll(t)} <= {s.ev} and path_of(s) == (plane, spine)
    out = s.poll(1.01)
    assert psns(out) == [0, 1, 2, 3, 4] and {p[1] for p in out} == {s.ev}
    assert path_of(s) != (plane, spine) and path_of(s)[0] == plane  # the QP keeps its port
    assert all(wire.decode(p[2])[0].flags & protocol.F_RETRANSMIT for p in out)


def test_completes_back_to_back_with_the_in_order_receiver():
    s = sender()
    done, got = [], {}
    s.on_completed = lambda msg_id, size, took: done.append(msg_id)
    rx = Receiver(0, 9, lambda msg_id, data: got.update({msg_id: bytes(data)}), in_order=True)
    data = bytes(range(256)) * 3
    s.send_message(4, data, 0.0)
    t = 0.0
    while not done and t < 5:
        for _plane, ev, packet, _ in s.poll(t):
            hdr, _, payload = wire.decode(packet)
            if hdr.psn == 3 and not hdr.flags & protocol.F_RETRANSMIT:
                continue  # lost once: go-back-N recovers it
            answer, flags, reason = rx.on_data(hdr, payload, False, t)
            if answer == protocol.NACK:
                s.on_nack(hdr._replace(type=answer, reason=reason), rx.control(ev, 3), t)
            elif answer == protocol.SACK:
                s.on_sack(hdr, rx.control(ev, 3), t)
        t += 0.01
    assert done == [4] and got == {4: data}
    # PSN 4 arrived out of sequence: its NACK sent the sender back to 3 at once.
    assert s.stats["nak_rx"] == 1 and s.stats["timeouts"] == 0 and s.stats["reroutes"] == 0


def test_same_rack_flows_stay_at_the_t0_and_queue_pairs_keep_their_ports():
    # h0 -> h1 share rack 0: every QP takes the T0 straight down, whatever its hash.
    near = RoceSender(0, 1, 9, FABRIC, CFG, lambda e: None, lambda *a: None, qps=16)
    assert {path_for_ev(FABRIC, 0, 1, qp.ev).spine for qp in near.qps} == {None}
    # Between racks the hash picks a T1 per QP, on the QP's own port: QP q of h0 -> h3
    # uses port (0 + 3 + q) mod 2, and keeps it when routing takes its T1 away.
    far = RoceSender(0, 3, 9, FABRIC, CFG, lambda e: None, lambda *a: None, qps=16)
    assert [qp.plane for qp in far.qps] == [(3 + q) % 2 for q in range(16)]
    assert all(path_for_ev(FABRIC, 0, 3, qp.ev).plane == qp.plane for qp in far.qps)
    assert {path_for_ev(FABRIC, 0, 3, qp.ev).spine for qp in far.qps} == {0, 1}
    far.routes.event("local-down", [(3, p, 0) for p in range(2)], 0.0)
    far.poll(0.01)
    assert [qp.plane for qp in far.qps] == [(3 + q) % 2 for q in range(16)]
    assert {path_for_ev(FABRIC, 0, 3, qp.ev).spine for qp in far.qps} == {1}


def test_a_queue_pair_past_its_retry_limit_moves_to_the_error_state():
    events, errors = [], []
    cfg = ProtocolConfig(window=8, mtu_payload=100, cc=False, rto_min_s=0.05, rto_max_s=0.1,
                         qp_retry_count=3)
    s = sender(events, cfg, on_qp_error=lambda qp, now: errors.append((qp.index, now)))
    s.send_message(0, bytes(500), 0.0)
    t = 0.0
    while t < 3.0:  # nothing ever answers: a silent switch on its path
        s.poll(t)
        t += 0.01
    assert s.stats["timeouts"] == 4 and s.stats["qp_errors"] == 1
    assert len(errors) == 1 and not s.busy and s.poll(t) == []
    (error,) = [e for e in events if e["event"] == "qp-error"]
    assert (error["qp"], error["retries"], error["psn"]) == (0, 3, 0)
    # -1: retry for ever, as a verbs QP never does.
    forever = sender(cfg=ProtocolConfig(window=8, mtu_payload=100, cc=False, rto_min_s=0.05,
                                        rto_max_s=0.1, qp_retry_count=-1))
    forever.send_message(0, bytes(500), 0.0)
    for i in range(300):
        forever.poll(i * 0.01)
    assert forever.stats["timeouts"] > 10 and forever.stats["qp_errors"] == 0 and forever.busy


def test_message_ids_are_unique():
    s = sender()
    s.send_message(0, b"a", 0.0)
    with pytest.raises(SenderError):
        s.send_message(0, b"b", 0.0)


def test_completes_under_random_loss_on_the_simulated_network():
    net = SimNet(FABRIC, "single-path", Chaos(loss=0.02, jitter_s=0.0002), seed=3)
    transfers = [(0, 3, 0), (1, 2, 0)]
    for src, dst, msg_id in transfers:
        net.send(src, dst, msg_id, 120_000)
    net.run(60.0, lambda: net.all_done(transfers))
    assert net.all_done(transfers) and all(net.delivered.values())
    assert net.stats()["nak_rx"] >= 1


def test_reroutes_around_a_dead_spine_when_routing_reconverges():
    net = SimNet(FABRIC, "single-path", seed=1)
    net.send(0, 3, 0, 200_000)
    net.run(0.01)
    dead = path_for_ev(FABRIC, 0, 3, net.hosts[0].senders[3].ev)
    net.outages.append(Outage(dead.plane, spine=dead.spine, start=0.01))
    # The spine's downlink to rack 1 failed: h0 hears of it from BGP.
    net.hosts[0].route_event("remote-down", [(3, dead.plane, dead.spine)], 0.01)
    net.run(30.0, lambda: net.all_done([(0, 3, 0)]))
    assert net.all_done([(0, 3, 0)])
    (reroute,) = [e for e in net.events if e["event"] == "reroute"]
    assert reroute["t"] == pytest.approx(1.01, abs=0.003)


def test_a_route_event_with_a_given_delay_takes_effect_then():
    from hosts.baseline import Routes

    routes = Routes(local_failover_s=0.005, reconvergence_s=1.0)
    assert routes.event("remote-down", [(3, 0, 1)], 10.0) == pytest.approx(11.0)
    assert routes.event("remote-down", [(3, 0, 1)], 10.0, delay_s=0.0) == 10.0
    with pytest.raises(ValueError):
        routes.event("local-down", [(3, 0, 1)], 10.0, delay_s=-1.0)


def test_dcqcn_cuts_a_queue_pair_at_most_once_per_round_trip():
    events = []
    s = sender(events)
    qp = s.qps[0]
    s.srtt = 0.03  # a slow link: a round trip is many DCQCN periods
    for t in (1.0, 1.01, 1.02):  # the marks of one window
        s._cnp(qp, t)
    assert s.stats["rate_cuts"] == 1
    s._cnp(qp, 1.031)
    assert s.stats["rate_cuts"] == 2
    s.srtt = 0.001  # a fast link: the fixed period rules
    s._cnp(qp, 1.031 + 0.0045)
    assert s.stats["rate_cuts"] == 3
