"""The RoCE baseline end to end between real endpoints: a lost packet recovered by the
NACK within a round trip (and only by a timeout when the NACK is ignored), queue pairs
on their ports spread over the T1s by the switches' ECMP hash, DCQCN cutting the rate
on CNPs and recovering, the agent's route command."""

from __future__ import annotations

import heapq

import pytest

from experiments.dataplanes.twin import twin_of
from hosts import protocol, wire
from hosts.agent import Agent
from hosts.baseline import RoceSender
from hosts.config import ProtocolConfig
from hosts.endpoint import make_endpoint
from hosts.payload import message_bytes, verify
from topologies.model import load_topology
from topologies.paths import path_for_ev

FABRIC = load_topology("2tier-2plane")
FABRIC8 = load_topology("2tier-8plane")
TWIN8 = twin_of(FABRIC8)
DCQCN_PERIOD_S = ProtocolConfig().dcqcn_period_s
DELAY_S = 0.0005  # one way


class Wire:
    """Endpoints joined by a fixed one-way delay, in virtual time. `drop(src, hdr)`
    loses a packet, `mark(src, hdr)` sets CE on it; every DATA packet is recorded."""

    def __init__(self, transport, fabric=FABRIC, drop=None, mark=None, protocol_cfg=None):
        self.now, self.queue, self.seq = 0.0, [], 0
        self.drop = drop or (lambda src, hdr: False)
        self.mark = mark or (lambda src, hdr: False)
        self.sent: list[tuple[float, int, wire.Header]] = []
        self.events: list[dict] = []
        self.delivered: dict = {}
        self.completed: set = set()
        self.hosts = [make_endpoint(
            transport, h.index, fabric, protocol_cfg or {},
            lambda e, h=h.index: self.events.append({**e, "host": h}),
            lambda src, msg_id, data, dst=h.index: self.delivered.update(
                {(src, dst, msg_id): verify(src, dst, msg_id, data)}),
            lambda dst, msg_id, size, src=h.index: self.completed.add((src, dst, msg_id)))
            for h in fabric.hosts]

    def send(self, src, dst, msg_id, size):
        self.hosts[src].send_message(dst, msg_id, message_bytes(src, dst, msg_id, size),
                                     self.now)

    def done(self, transfers):
        return all(self.delivered.get(t) and t in self.completed for t in transfers)

    def run(self, until, transfers):
        while self.now < until and not self.done(transfers):
            for src, host in enumerate(self.hosts):
                for plane, dst, _ev, data, _cls in host.poll(self.now):
                    hdr = wire.decode(data)[0]
                    is_data = hdr.type == protocol.DATA
                    if is_data:
                        self.sent.append((self.now, src, hdr))
                    if self.drop(src, hdr):
                        continue
                    self.seq += 1
                    heapq.heappush(self.queue, (self.now + DELAY_S, self.seq, dst, plane, src,
                                                data, is_data and self.mark(src, hdr)))
            wakes = [w for w in (h.next_wakeup(self.now) for h in self.hosts) if w is not None]
            if self.queue:
                wakes.append(self.queue[0][0])
            if not wakes:
                break
            self.now = max(min(wakes), self.now + 1e-6)
            while self.queue and self.queue[0][0] <= self.now:
                _, _, dst, plane, src, data, ce = heapq.heappop(self.queue)
                self.hosts[dst].on_datagram(plane, src, data, ce, self.now)
        return self.now


def stat(net, key):
    return sum(h.stats().get(key, 0) for h in net.hosts)


# ---------------------------------------------------------------------- go-back-N with NAK
LOST_PSN = 20


def drop_once(psn):
    lost = []

    def drop(src, hdr):
        if hdr.type == protocol.DATA and hdr.psn == psn and not lost:
            lost.append(hdr)
            return True
        return False
    return drop


def one_loss(transport="roce"):
    """h0 -> h3, 100 packets, the first transmission of one packet lost: (net, time
    from the loss to its retransmission)."""
    net = Wire(transport, drop=drop_once(LOST_PSN))
    net.send(0, 3, 0, 100 * 1200)
    net.run(10.0, [(0, 3, 0)])
    assert net.done([(0, 3, 0)])
    (first, again) = [t for t, _, hdr in net.sent if hdr.psn == LOST_PSN][:2]
    return net, again - first


def clean_rtt() -> float:
    net = Wire("roce")
    net.send(0, 3, 0, 1200)
    return net.run(1.0, [(0, 3, 0)])


def test_a_lost_packet_is_recovered_by_the_nack_within_a_round_trip():
    net, recovery = one_loss()
    rtt = clean_rtt()
    # The next packet leaves about a packet time after the lost one, arrives out of
    # sequence, is NACKed at once; the NACK takes a one-way delay back.
    assert recovery < 2 * rtt < ProtocolConfig().rto_min_s
    assert stat(net, "nak_rx") == 1 and stat(net, "naks") == 1
    assert stat(net, "timeouts") == 0
    nak = next(e for e in net.events if e["event"] == "nak")
    assert nak["psn"] == LOST_PSN


def test_if_the_nack_were_ignored_the_loss_would_wait_for_a_timeout(monkeypatch):
    # The same run with the sender deaf to NACKs: this is what the test above rules out.
    monkeypatch.setattr(RoceSender, "on_nack", lambda self, hdr, ctl, now: None)
    net, recovery = one_loss()
    floor = net.hosts[0].config.rto_min_s  # the fabric's queue drain (link_adjusted)
    assert recovery >= floor and stat(net, "timeouts") >= 1


def test_go_back_n_resends_everything_from_the_expected_psn_and_marks_it():
    net, _ = one_loss()
    lost_at = next(i for i, (_, _, hdr) in enumerate(net.sent) if hdr.psn == LOST_PSN)
    resent = [hdr for _, _, hdr in net.sent[lost_at + 1:] if hdr.flags & protocol.F_RETRANSMIT]
    assert resent[0].psn == LOST_PSN
    assert [h.psn for h in resent] == list(range(LOST_PSN, LOST_PSN + len(resent)))


# ---------------------------------------------------------------------- queue pairs
def qp_paths(transport, fabric, src, dst, size):
    net = Wire(transport, fabric)
    net.send(src, dst, 0, size)
    net.run(30.0, [(src, dst, 0)])
    assert net.done([(src, dst, 0)])
    per_qp: dict[int, set] = {}
    packets: dict[int, int] = {}
    for _, _, hdr in net.sent:
        qp = hdr.psn >> protocol.QP_PSN_SHIFT
        path = path_for_ev(fabric, src, dst, hdr.ev)
        per_qp.setdefault(qp, set()).add((path.plane, path.spine))
        packets[qp] = packets.get(qp, 0) + 1
    return net, per_qp, packets


def test_one_queue_pair_takes_one_path():
    _, per_qp, _ = qp_paths("roce", TWIN8, 0, 7, 60 * 1200)
    assert list(per_qp) == [0] and len(per_qp[0]) == 1


@pytest.mark.parametrize("transport, qps", [("roce-8", 8), ("roce-16", 16)])
def test_queue_pairs_each_keep_one_path_over_the_twins_spines(transport, qps):
    # h0 -> h7 on the single-plane twin of 2tier-8plane: one port, 4 spines.
    net, per_qp, packets = qp_paths(transport, TWIN8, 0, 7, qps * 20 * 1200)
    assert sorted(per_qp) == list(range(qps))
    assert all(len(paths) == 1 for paths in per_qp.values())  # a QP sticks to its path
    used = set().union(*per_qp.values())
    # Hashed, so some QPs share a spine (ECMP collisions); still they spread.
    assert {plane for plane, _ in used} == {0} and len(used) >= 2
    # One message is striped evenly over the QPs.
    assert set(packets.values()) == {20}
    assert stat(net, "timeouts") == 0


def test_on_the_planes_each_queue_pair_is_bound_to_one_port():
    # roce-8@planes on 2tier-8plane: QP q of h0 -> h7 uses port (0 + 7 + q) mod 8.
    net, per_qp, _ = qp_paths("roce-8@planes", FABRIC8, 0, 7, 8 * 20 * 1200)
    assert {q: {plane for plane, _ in paths} for q, paths in per_qp.items()} == {
        q: {(7 + q) % 8} for q in range(8)}
    assert all(len(paths) == 1 for paths in per_qp.values())


def test_same_rack_queue_pairs_never_leave_the_t0():
    _, per_qp, _ = qp_paths("roce-16", TWIN8, 0, 3, 16 * 5 * 1200)  # h0, h3: rack 0
    assert set().union(*per_qp.values()) == {(0, None)}


def test_messages_start_on_successive_queue_pairs():
    sender = RoceSender(0, 3, 3, FABRIC, ProtocolConfig(mtu_payload=100), lambda e: None,
                        lambda *a: None, qps=4)
    for msg_id in range(4):
        sender.send_message(msg_id, bytes(100), 0.0)  # one packet each
    assert [len(qp.packets) for qp in sender.qps] == [1, 1, 1, 1]


# ---------------------------------------------------------------------- DCQCN
def ecn_echo(sender, qp_index, psn, now):
    """A CNP for the QP (what its receiver sends for a CE-marked packet)."""
    qp = sender.qps[qp_index]
    hdr = wire.Header(protocol.CNP, 0, 0, 0, 3, qp.ev, 0, qp.first_psn, 0, 0, 0)
    sender.on_packet(hdr, wire.Control(0, 0, 0, qp.ev, 1, 3), now)


def gaps(out_times):
    return [b - a for a, b in zip(out_times, out_times[1:])]


def send_times(sender, t, count, until):
    """When the sender lets its next `count` packets go, polled whenever it asks."""
    times = []
    while len(times) < count and t < until:
        times += [t] * len(sender.poll(t, budget=1))
        t = sender.timer_at(t)
    return times


def test_dcqcn_cuts_the_rate_on_ecn_and_recovers_without_it():
    line = 1e7  # bytes a second
    s = RoceSender(0, 3, 3, FABRIC, ProtocolConfig(mtu_payload=1000, window=1000, cc=False),
                   lambda e: None, lambda *a: None, line_rate_Bps=line)
    s.send_message(0, bytes(1_000_000), 0.0)
    frame = protocol.frame_bytes(protocol.MRC_HEADER_BYTES + 1000)
    times = send_times(s, 0.0, 5, 1.0)
    assert gaps(times) == pytest.approx([frame / line] * 4)
    t = times[-1]
    ecn_echo(s, 0, 0, t)
    assert s.qps[0].rate == pytest.approx(0.5)  # alpha starts at 1: the first cut halves
    ecn_echo(s, 0, 1, t + DCQCN_PERIOD_S / 4)  # within the period: no second cut
    assert s.qps[0].rate == pytest.approx(0.5) and s.stats["rate_cuts"] == 1
    times = send_times(s, t + DCQCN_PERIOD_S / 4, 5, t + DCQCN_PERIOD_S)
    assert gaps(times) == pytest.approx([2 * frame / line] * 4)
    t = times[-1]
    # Quiet periods: the rate climbs back to the line rate and alpha decays.
    alpha = s.qps[0].alpha
    for i in range(200):
        s.poll(t + i * DCQCN_PERIOD_S)
    assert s.qps[0].rate == 1.0 and s.qps[0].alpha < alpha


def test_ecn_marks_slow_the_baseline_down_on_the_wire():
    def run(mark):
        net = Wire("roce", mark=mark)
        net.send(0, 3, 0, 200 * 1200)
        return net, net.run(30.0, [(0, 3, 0)])

    clean, clean_t = run(None)
    marked, marked_t = run(lambda src, hdr: hdr.psn % 4 == 0)
    assert stat(clean, "rate_cuts") == 0 and stat(marked, "rate_cuts") >= 3
    assert marked_t > 1.3 * clean_t
    assert marked.done([(0, 3, 0)])


# ---------------------------------------------------------------------- the agent's command
def test_the_agents_route_command_reaches_the_endpoint():
    agent = Agent.__new__(Agent)  # its command parser only: no sockets, no namespace
    agent.fabric, agent.me = FABRIC, 0
    agent.endpoint = make_endpoint("roce", 0, FABRIC, {}, lambda e: None, lambda *a: None,
                                   lambda *a: None)
    said = []
    agent.emit = said.append
    agent.command('{"cmd": "route", "kind": "remote-down", "paths": [[3, 0, 1], [2, 1, null]]}')
    assert said == []
    routes = agent.endpoint.routes
    routes.advance(routes.next_due())
    assert routes.dead == {(3, 0, 1), (2, 1, None)}
    agent.command('{"cmd": "route", "kind": "sideways", "paths": []}')
    assert said[0]["event"] == "error" and "sideways" in said[0]["message"]


def test_round_trip_samples_are_round_trips_not_gaps_between_acks():
    net = Wire("roce")
    net.send(0, 3, 0, 100 * 1200)
    net.run(10.0, [(0, 3, 0)])
    sender = net.hosts[0].senders[3]
    # Packets leave every 0.5 ms (20 Mbit/s); each comes back a round trip later.
    assert sender.srtt == pytest.approx(2 * DELAY_S, rel=0.2)


# ---------------------------------------------------------------------- scheduling
def test_a_paused_port_holds_its_queue_pairs_and_a_resume_sends_at_once():
    # The endpoint looks at a connection when its timer is due or something touched it:
    # a pause and a resume touch every one, so the resumed QPs go within the turn.
    net = Wire("roce")
    sender = net.hosts[0]
    for plane in range(FABRIC.spec.planes):
        sender.pause(plane, True, 0.0)
    net.send(0, 3, 0, 20 * 1200)
    assert sender.poll(0.0) == [] and sender.next_wakeup(0.0) > 0.02
    resumed_at = net.now = 0.02  # before the paused connection's own timer
    for plane in range(FABRIC.spec.planes):
        sender.pause(plane, False, resumed_at)
    assert sender.next_wakeup(resumed_at) == resumed_at
    net.run(1.0, [(0, 3, 0)])
    assert net.done([(0, 3, 0)]) and net.sent[0][0] == resumed_at


def test_a_turn_looks_at_the_connections_with_something_due_not_at_every_one(monkeypatch):
    # roce-16 on cluster-c: 63 peers of 16 QPs a host, most waiting for acks; a turn
    # that asked each for its timer and polled each left the agents no time to send.
    asked: list[int] = []
    timer_at = RoceSender.timer_at

    def counting(self, now):
        asked.append(self.peer)
        return timer_at(self, now)

    monkeypatch.setattr(RoceSender, "timer_at", counting)
    host = make_endpoint("roce-16", 0, FABRIC8, {}, lambda e: None, lambda *a: None,
                         lambda *a: None)
    peers = range(1, len(FABRIC8.hosts))
    for dst in peers:
        host.send_message(dst, 0, message_bytes(0, dst, 0, 1200), 0.0)
    now, sent = 0.0, 0
    while sent < len(peers):  # every connection's one packet out, none answered
        sent += len(host.poll(now))
        now += 0.001
    host.next_wakeup(now)  # the last packets' connections looked at once more
    asked.clear()
    for _turn in range(3):  # every connection busy waiting for its ack, nothing due
        assert host.next_wakeup(now) > now
        assert host.poll(now) == []
        now += 1e-4
    assert asked == []
    host.send_message(5, 1, message_bytes(0, 5, 1, 1200), now)  # one touched
    host.poll(now)
    host.next_wakeup(now)
    assert set(asked) == {5}


@pytest.mark.parametrize("transport", ["mrc", "roce-16"])
def test_a_progress_sample_adds_up_what_every_connection_holds(transport):
    # Kept as the figures change, it must still be what a walk over the connections finds.
    net = Wire(transport)
    transfers = [(s, d, 0) for s in range(4) for d in range(4) if s != d]
    for s, d, m in transfers:
        net.send(s, d, m, (1 + s + d) * 1500)
    sampled = [h.progress() for h in net.hosts]  # before anything arrived
    assert all(p["rx_bytes"] == 0 and p["rx_by_src"] == {} for p in sampled)
    net.run(0.004, transfers)  # part of the way
    net.hosts[1].progress()
    net.run(5.0, transfers)
    assert net.done(transfers)
    for host in net.hosts:
        by_src: dict[int, int] = {}
        for (peer, _, _), receiver in host.receivers.items():
            if receiver.stats["rx_bytes"]:
                by_src[peer] = by_src.get(peer, 0) + receiver.stats["rx_bytes"]
        sample = host.progress()
        assert sample["rx_by_src"] == by_src and sample["rx_bytes"] == sum(by_src.values())
        assert sample["bad_paths"] == sum(s.retired_paths() for s in host.senders.values())
        rtts = [s.srtt for s in host.senders.values() if s.srtt]
        assert sample["srtt_ms"] == round(1000 * sum(rtts) / len(rtts), 3)
