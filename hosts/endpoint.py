"""One host's transport endpoint: its senders and receivers, multiplexed over the planes.

The agent process (hosts/agent.py) and the simulated network (hosts/simnet.py) drive it
the same way: `send_message()`, `on_datagram()` for every datagram received (with the
plane it came in on and whether it was CE-marked), `poll()` for what to send now
(plane, destination host, EV, bytes, is DATA), `next_wakeup()` for the event loop's
timeout, and `set_local_plane()` when a NIC port loses or regains carrier. It paces each
plane at its link rate, so the host's own queues never overflow. MRC answers take the EVs
of the reverse EV set of their peer (hosts/reverse.py), whose probes it sends. A
connection to a host of the same rack keeps to the direct path through the T0, its
data and those probes alike (`rack_local_paths`, topologies/paths.py
`shortest_choices`); a CE-marked PROBE is answered with an ECN echo, which its sender
does not count as a success.

Transports (hosts/protocol.py TRANSPORTS): `mrc`; `mrc-no-probe`, whose senders never
probe (`probes` off), so a retired path never comes back; `mrc-no-trim`, whose data
asks switches not to trim it (the traffic class, set by the agent's sockets); and
the RoCE baseline of hosts/baseline.py (`roce`, `roce-8`, `roce-16`, `single-path`, and
their `-pfc` and `@planes` variants), whose queue pairs follow what the fabric's
routing tells the host (`route_event()`) and whose answers take the path the fabric's
ECMP gives them; its receivers send a CNP for a CE-marked packet (DCQCN), and a queue
pair past its retry limit is reported to `on_qp_error(peer, qp, now)`.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import replace

from hosts import protocol, wire
from hosts.baseline import RoceSender, Routes, qp_flow_port
from hosts.config import REVERSE_PROBE_S, ConfigError, ProtocolConfig
from hosts.pacing import Pacer
from hosts.protocol import (
    EP_PROBE_CONN,
    MAX_MSG_LEN,
    QP_PSN_SHIFT,
    ev_choice,
    ev_plane,
    make_ev,
    transport_spec,
)
from hosts.receiver import NO_ANSWER, Receiver
from hosts.reverse import ReverseEvs
from hosts.sender import Sender
from hosts.transport import TransportSender
from topologies.model import Fabric
from topologies.paths import choices_per_plane, ecmp_path, path_index, shortest_choices

_DATA, _SACK, _F_LAST = protocol.DATA, protocol.SACK, protocol.F_LAST
_TRIMMED_CLASSES = frozenset((protocol.TRIMMED, protocol.TRIMMED_LASTHOP))
_decode = wire.decode

# Reverse-EV probes go no more often than once in this many frame times of the host
# link per peer and plane: about two and a half unloaded round trips through three
# switches (the paper probes once an RTT). At 2.5 Mbit/s and up the 50 ms default is
# longer; at BMv2's CPU-safe 0.43 Mbit/s on 2tier-8plane the default made probes and
# their replies eleven times the data packets, and the switches' CPU the bottleneck.
REVERSE_PROBE_FRAMES = 10


# The fewest base round trips before the first probe of a retired path (link_adjusted).
PROBE_INITIAL_RTTS = 2.0

# DATA packets one turn of the event loop makes, shared among the connections with data
# to send (each gets at least CONNECTION_PACKETS_MIN, so that a turn stays short with
# many). A lone connection spraying over 8 planes gets 16 packets per plane socket per
# send call: with 32 a turn (4 a call) the system calls cost an 8-plane sender 18% of
# its packet rate on 1 Gbit/s links (45,000 against 53,000 packets/s, make bench's fabric).
# On capped links pacing lets fewer leave in a turn anyway.
TURN_PACKETS = 128
CONNECTION_PACKETS_MIN = 32


def link_adjusted(config: ProtocolConfig, fabric: Fabric, trims: bool = True) -> ProtocolConfig:
    """`config` with the timers that must not be shorter than the fabric's slow links
    allow raised to what the host link's rate (and its queues) need. `trims`: the
    transport's data is trimmed by switches (mrc), not dropped (mrc-no-trim)."""
    link = fabric.spec.host_t0
    frame_s = 1 / protocol.link_pps(link.rate_mbit, fabric.spec.data_frame_bytes)
    # How much later than a sibling a healthy path may deliver: a path held because a
    # packet of it was late is retired only if its probe finds no answer within its
    # round trip plus that (hosts/sender.py `_late`).
    default = ProtocolConfig()
    # Packets of the fabric's MTU unless the scenario asks for smaller ones: a larger
    # packet would not leave its port whole.
    if config.mtu_payload == default.mtu_payload:
        config = replace(config, mtu_payload=fabric.spec.mtu_payload)
    elif config.mtu_payload > fabric.spec.mtu_payload:
        raise ConfigError(f"protocol.mtu_payload: {config.mtu_payload} bytes, more than "
                          f"{fabric.name}'s {fabric.spec.mtu_payload}: at most that, or a "
                          "topology mtu_payload (MTU=) that large")
    if config.path_skew_s == default.path_skew_s:
        config = replace(config, path_skew_s=path_skew_s(fabric, trims))
    # A packet may wait behind a full queue at a hop, so a timeout shorter than one
    # full queue's drain cannot tell loss from queueing (64 frames take 265 ms at 2.5
    # Mbit/s, where a 50 ms floor retired thousands of paths in an all-to-all that lost
    # nothing). The floor rises to that drain time, and the ceiling with it.
    # The default floor is that drain, whatever the rate, so that the timeout is the
    # same number of round trips on a capped fabric (docs/similarity.md); a scenario's
    # own floor is only raised to it.
    drain_s = link.queue_pkts * frame_s
    if drain_s > config.rto_min_s or config.rto_min_s == default.rto_min_s:
        config = replace(config, rto_min_s=drain_s, rto_max_s=max(config.rto_max_s, drain_s))
    # NSCC lets ECN lead: its delay ceiling must lie above the queue at which switches
    # start marking, or slow links (4 ms a frame at 2.5 Mbit/s) cut every window
    # before any mark, and ECN load balancing never starts.
    ecn_delay_s = fabric.spec.ecn_threshold_pkts * frame_s
    if ecn_delay_s > config.nscc_qa_delay_s:
        config = replace(config, nscc_qa_delay_s=ecn_delay_s)
    # Only the default: a scenario that asks for faster probes gets them.
    probe_s = REVERSE_PROBE_FRAMES * frame_s
    if config.reverse_probe_s == REVERSE_PROBE_S and probe_s > REVERSE_PROBE_S:
        config = replace(config, reverse_probe_s=probe_s)
    # Before a path has RTT samples, nothing says how long its packets may take but
    # the fabric itself: a timeout shorter than its worst round trip could retire a
    # healthy path whose queues the starting run filled.
    # The default is that worst round trip, whatever the rate (as the floor above).
    worst_s = worst_round_trip_s(fabric)
    if worst_s > config.rto_initial_s or config.rto_initial_s == default.rto_initial_s:
        config = replace(config, rto_initial_s=worst_s)
    # The default probe timers are at least as many base round trips as they are on
    # the reference fabric (2tier-8plane at 10 Mbit/s: 50 ms is 2 of them): on a slower
    # fabric (a rate cap, BMv2) a probe sent sooner than a round trip after the path
    # was retired, or replies spaced closer than one, say nothing new about the path.
    stretch = PROBE_INITIAL_RTTS * fabric.spec.base_rtt_s / default.probe_initial_s
    if stretch > 1 and (config.probe_initial_s, config.probe_max_s, config.probe_spacing_s) == (
            default.probe_initial_s, default.probe_max_s, default.probe_spacing_s):
        config = replace(config, probe_initial_s=default.probe_initial_s * stretch,
                         probe_max_s=default.probe_max_s * stretch,
                         probe_spacing_s=default.probe_spacing_s * stretch)
    return config


def path_skew_s(fabric: Fabric, trims: bool = True) -> float:
    """How much longer than a sibling of its plane a healthy path may take: the data
    queues where the two differ (the T0 uplink and the T1 downlink), full to the
    threshold past which switches trim (`trims`) or to their capacity, each drained at
    its link's rate."""
    spec = fabric.spec
    frames = spec.trim_threshold_pkts if trims else spec.t0_t1.queue_pkts
    return 2 * frames / protocol.link_pps(spec.t0_t1.rate_mbit, spec.data_frame_bytes)


def worst_round_trip_s(fabric: Fabric) -> float:
    """The longest a DATA packet and its answer can take on a healthy fabric: every
    data queue of the longest path full (the T0 uplink, the T1 downlink, the port
    facing the receiver; the sender paces its own), each drained at its link's rate,
    plus the propagation of the four links there and back (answers ride the priority
    queue, which data never holds up)."""
    spec = fabric.spec
    drain = 0.0
    for link in (spec.t0_t1, spec.t0_t1, spec.host_t0):
        drain += link.queue_pkts / protocol.link_pps(link.rate_mbit, spec.data_frame_bytes)
    return drain + 2 * (2 * spec.host_t0.delay_ms + 2 * spec.t0_t1.delay_ms) / 1000


class Endpoint:
    def __init__(self, me: int, fabric: Fabric, transport: str, config: ProtocolConfig,
                 on_event, on_delivered, on_completed, on_qp_error=None):
        self.spec = transport_spec(transport)
        if not self.spec.probes and not self.spec.baseline:
            config = replace(config, probes=False)
        config = link_adjusted(config, fabric, self.spec.trims)
        self.me, self.fabric, self.transport, self.config = me, fabric, transport, config
        self.ack_every = config.ack_every
        self.on_event, self.on_delivered, self.on_completed = on_event, on_delivered, on_completed
        self.on_qp_error = on_qp_error or (lambda peer, qp, now: None)
        self.planes = fabric.spec.planes
        self.local_up = [True] * self.planes
        self._port_state = (1 << self.planes) - 1
        # Plain SACKs wait, grouped by (peer, connection, queue pair), and by (plane,
        # path) when not held: [latest header, PSNs answered, when due, latest packet's
        # plane]. A group is answered when it holds ack_every packets, or at the first
        # poll ack_delay_s after its first packet (0: the end of the receive batch), as
        # a NIC coalesces acks. Anything unusual (trimmed, CE-marked, LAST) is answered
        # at once.
        self.pending_acks: dict[tuple[int, ...], list] = {}
        self.ack_delay_s = config.ack_delay_rtts * fabric.spec.base_rtt_s
        self.acks_due = float("inf")  # the soonest group's due time
        self.paths_to: dict[int, int] = {}  # peer -> paths per plane
        # The share of its line rate the NIC's ports run at (set_line_share).
        self.line_share = 1.0
        self.pacer = Pacer(self.planes, fabric.spec.host_t0.rate_mbit,
                           config.mtu_payload + protocol.MRC_HEADER_BYTES, config.pace)
        self.senders: dict[int, TransportSender] = {}
        # Keyed by (peer, connection, queue pair); MRC connections have queue pair 0 only.
        self.receivers: dict[tuple[int, int, int], Receiver] = {}
        # Baseline transports: queue pairs per connection, and what routing told this host.
        self.qps = self.spec.qps or None
        self.routes = Routes(config.local_failover_s, config.reconvergence_s)
        # RoCE answers: (routing's version, EV or None) by (peer, plane, queue pair).
        self._ecmp_back_paths: dict[tuple[int, int, int], tuple[int, int | None]] = {}
        self.cnp_at: dict[tuple[int, int, int], float] = {}  # (peer, conn, QP) -> last CNP
        self.paused: set[int] = set()  # NIC ports PFC pauses now (the baseline's data)
        self.control_out: deque = deque()
        # The connections' timers (_refresh): heap of (due, seq, peer), each peer's
        # current due time, those with packets pacing holds, those to look at again.
        self._timers: list[tuple[float, int, int]] = []
        self._due: dict[int, float | None] = {}
        self._working: set[int] = set()
        self._touched: set[int] = set()
        self._order: dict[int, int] = {}  # peer -> creation order of its sender
        # progress() keeps its figures as they change, not by walking every connection
        # (a sample every 50 ms per host, and one per delivery): the receivers with data
        # since the last sample and the bytes each had then, the senders touched since,
        # and each sender's retired paths and smoothed RTT as of then.
        self._rx_fresh: set[Receiver] = set()
        self._rx_seen: dict[Receiver, int] = {}
        self._rx_by_src: dict[int, int] = {}
        self._rx_total = 0
        self._sample_fresh: set[int] = set()
        self._retired_of: dict[int, int] = {}
        self._srtt_of: dict[int, float] = {}
        self._seq = 0
        self.peers_seen: set[int] = set()
        self.counters = {"garbage": 0, "unknown_conn": 0, "control_tx": 0, "reverse_probes": 0}
        # MRC: the EVs control packets to each peer go on (hosts/reverse.py).
        self.reverse: dict[int, ReverseEvs] = {}
        self._rr = 0
        # The control API (hosts/mrc_ctl.py): EV probes awaiting their reply, by (peer,
        # request id): (sent at, deadline); where their outcome goes
        # (on_ep_response(peer, req_id, plane or None, rtt_s or None, now): None when
        # none came by the deadline); who hears of each new connection (on_new_sender).
        self.ep_probes: dict[tuple[int, int], tuple[float, float]] = {}
        self.on_ep_response = None
        self.on_new_sender = None

    # ------------------------------------------------------------------ API
    def send_message(self, dst: int, msg_id: int, data: bytes, now: float) -> None:
        self._sender(dst).send_message(msg_id, data, now)
        self._touch(dst)

    def on_datagram(self, plane: int, src: int, data: bytes, ce: bool, now: float,
                    cls: int | None = None) -> None:
        """A datagram from host `src` on `plane`, CE-marked or not, in traffic class
        `cls` (its DSCP's, hosts/protocol.py; None for a DSCP the topology does not
        name): a DATA packet in TRIMMED or TRIMMED_LASTHOP was trimmed on its way."""
        trimmed = cls if cls in _TRIMMED_CLASSES else None
        try:
            hdr, ctl, payload = _decode(data, MAX_MSG_LEN, trimmed is not None)
        except wire.WireError:
            self.counters["garbage"] += 1
            return
        self.peers_seen.add(src)
        if self.qps:
            # A host that only receives answers on the paths its routing offers now:
            # the route events whose delay has passed apply here too, not only when a
            # queue pair of its own sends.
            self.routes.advance(now)
        kind = hdr[0]
        if kind == _DATA:
            # The hot path: every DATA packet. Lookups inlined, the common case first.
            conn_id = hdr.conn_id
            qps = self.qps
            qp = hdr.psn >> QP_PSN_SHIFT if qps else 0
            receiver = self.receivers.get((src, conn_id, qp)) or self._receiver(src, conn_id, qp)
            answer, flags, reason = receiver.on_data(hdr, payload, ce, now, trimmed)
            self._rx_fresh.add(receiver)
            if not qps:
                reverse = self.reverse.get(src) or self._reverse_set(src)
                reverse.inbound(now)
            elif ce:
                # RoCE answers carry no ECN echo: the congestion news is a CNP.
                flags &= ~protocol.F_ECN_ECHO
                self._cnp(src, hdr, plane, qp, now)
            if answer == NO_ANSWER:
                return
            if reason:
                self.on_event({"t": now, "event": "gap" if reason == protocol.R_GAP else "trim",
                               "psn": hdr.psn, "ev": hdr.ev, "peer": src})
            if (answer == _SACK and not flags and not hdr.flags & _F_LAST
                    and self.ack_every > 1):
                # Plain SACKs wait for company (above), and one SACK answers the whole
                # group if it can. Held, they are grouped by connection: each of its
                # paths carries a packet far more rarely than the hold (37 ms apart
                # for one pair on cluster-b, against a 3.3 ms hold). To the end of the
                # batch only, by path, so that a SACK's echo names the path of every
                # packet it answers.
                if self.ack_delay_s:
                    key = (src, conn_id, qp)
                else:
                    paths = self.paths_to.get(src) or self._paths_to(src)
                    key = (src, conn_id, qp, plane, path_index(hdr.ev, paths))
                group = self.pending_acks.get(key)
                if group is None:
                    due = now + self.ack_delay_s
                    self.pending_acks[key] = [hdr, [hdr.psn], due, plane]
                    if due < self.acks_due:
                        self.acks_due = due
                    return
                group[0] = hdr
                group[3] = plane
                psns = group[1]
                psns.append(hdr.psn)
                if len(psns) < self.ack_every:
                    return
                # acks_due may now be early: the next poll finds nothing due and
                # sets it again (_due_acks).
                del self.pending_acks[key]
                self._sack_group(key, hdr, psns, plane)
                return
            ctl = receiver.control(hdr.ev, self._port_state)
            self._answer(answer, flags, reason, plane, src, hdr, ctl)
        elif kind == protocol.PROBE:
            if (not self.qps and hdr.conn_id == self._peer_conn_id(src)
                    and not hdr.psn & protocol.SUSPECT_SEQ):
                # The peer probes a path it retired: perhaps only our answers died. Not
                # so a probe about a late packet (SUSPECT_SEQ): the peer holds that path
                # because a packet was slow, not dead. Taken as a suspect reverse, the
                # late packets' probes sent the answers of all of a plane's paths onto
                # its one confirmed EV (seen after eight T0-T1 links came back in make
                # paper's t0-t1-link-flaps, where every path of the plane was then held
                # over and over until the end of the run).
                self._reverse_set(src).suspect(plane, hdr.ev, now)
            ctl = wire.Control(0, 0, 0, hdr.ev, 0, self.port_state())
            # A CE-marked probe says the path is congested: the prober must not count
            # it as a success (hosts/evset.py).
            flags = protocol.F_ECN_ECHO if ce else 0
            receiver = self.receivers.get((src, hdr.conn_id, 0))
            if receiver is not None:
                flags |= receiver.probe_flags(hdr)  # a late packet's probe: did it arrive?
            self._answer(protocol.PROBE_REPLY, flags, 0, plane, src, hdr, ctl)
        elif kind == protocol.PLANE_STATUS:
            sender = self.senders.get(src)
            if sender is not None:
                sender.remote_ports(ctl.port_state, now)
                self._touch(src)
        else:
            if kind == protocol.PROBE_REPLY and hdr.conn_id == EP_PROBE_CONN:
                self._ep_reply(plane, src, hdr.psn, now)
                return
            if (kind == protocol.PROBE_REPLY and not self.qps
                    and hdr.conn_id == self._peer_conn_id(src)):
                self._reverse_set(src).on_probe_reply(ev_plane(ctl.echo_ev), ctl.echo_ev, now)
                return
            sender = self.senders.get(src)
            if sender is None or sender.conn_id != hdr.conn_id:
                self.counters["unknown_conn"] += 1
                return
            self._touch(src)
            if kind == protocol.CNP:
                sender.on_cnp(hdr, ctl, now)
            elif kind == protocol.SACK:
                sender.on_sack(hdr, ctl, now)
                if not self.qps:
                    # Our data crossed to the peer on this EV: good for our answers too.
                    self._reverse_set(src).confirm(ev_plane(ctl.echo_ev), ctl.echo_ev, now)
            elif kind == protocol.NACK:
                sender.on_nack(hdr, ctl, now)
            elif kind == protocol.PROBE_REPLY:
                sender.on_probe_reply(hdr, ctl, now, ce)

    def poll(self, now: float) -> list[tuple[int, int, int, bytes, bool]]:
        out = []
        if self.ep_probes:
            self._ep_expire(now)
        if now >= self.acks_due:
            self._due_acks(now)
        for peer, reverse in self.reverse.items():
            if now >= reverse.next_at:
                self._reverse_probes(peer, reverse, now)
        pacer = self.pacer
        pacer.at(now)
        control_out = self.control_out
        if control_out:
            charge = pacer.charge
            while control_out:
                packet = control_out.popleft()
                charge(packet[0], len(packet[3]))
                out.append(packet)
                self.counters["control_tx"] += 1
        senders, due = self._due_senders(now)
        if not senders:
            return out
        # Round-robin over connections, one small batch each, so they share the planes.
        self._rr = (self._rr + 1) % len(senders)
        ready, charge, resend = pacer.ready, pacer.charge, pacer.ready_resend
        full = pacer.full
        append = out.append
        budget = max(CONNECTION_PACKETS_MIN, TURN_PACKETS // len(senders))
        for i in range(len(senders)):
            sender = senders[(self._rr + i) % len(senders)]
            peer = sender.peer
            if peer not in due and full():
                continue  # only packets to send, and no plane may take one now
            for plane, ev, data, cls in sender.poll(now, ready, budget, charge, resend):
                append((plane, peer, ev, data, cls))
        polled = [s.peer for s in senders]
        self._touched.update(polled)
        self._sample_fresh.update(polled)
        return out

    def next_wakeup(self, now: float) -> float | None:
        wake = min(d for _, d in self.ep_probes.values()) if self.ep_probes else None
        if self.pending_acks:
            wake = self.acks_due if wake is None else min(wake, self.acks_due)
        for reverse in self.reverse.values():
            due = reverse.next_due(now)
            if due is not None:
                wake = due if wake is None else min(wake, due)
        self.pacer.at(now)
        # The connections' timers wait in a heap (_refresh), so the loop looks only at
        # the soonest and at those with packets that pacing holds.
        self._refresh(now)
        timers, due = self._timers, self._due
        while timers and due.get(timers[0][2]) != timers[0][0]:
            heapq.heappop(timers)  # stale: rescheduled or idle since
        if timers:
            wake = timers[0][0] if wake is None else min(wake, timers[0][0])
        for sender in [self.senders[peer] for peer in self._working]:
            if sender.busy:
                timer = sender.timer_at(now)
                wake = timer if wake is None else min(wake, timer)
                if sender.has_work():
                    wanted = sender.wanted_planes()
                    if not wanted:
                        continue
                    soonest = self.pacer.ready_at(wanted, resend=sender.resending)
                    if soonest > now:
                        wake = min(wake, soonest)
                    else:
                        return now
        return wake

    # ------------------------------------------------------------------ control API
    # What hosts/mrc_ctl.py (OCP MRC's mrc_ctl.h) acts through.
    def connection(self, peer: int) -> TransportSender:
        """The sender of the connection to `peer` (made if new), for an operator to act
        on: the next poll() looks at it, whatever the operator changed."""
        sender = self._sender(peer)
        self._touch(peer)
        return sender

    def tap_events(self, tap) -> None:
        """Every event of the endpoint and its connections also goes to `tap(event)`,
        after the event log."""
        log = self.on_event

        def tee(event: dict) -> None:
            log(event)
            tap(event)

        self.on_event = tee
        for sender in self.senders.values():
            sender.on_event = tee

    def ev_probe(self, peer: int, ev: int, req_id: int, now: float, deadline: float) -> None:
        """An endpoint's EV probe (OCP MRC's EP_OP_EV_PROBE): a PROBE to `peer` on `ev`
        outside any connection (conn_id EP_PROBE_CONN, the request id as its PSN),
        answered like any probe; its round trip, or nothing by `deadline`, goes to
        on_ep_response."""
        plane = ev_plane(ev)
        if plane >= self.planes:
            raise ValueError(f"EV {ev:#010x} names plane {plane}; this host has "
                             f"{self.planes}")
        if not self.local_up[plane]:
            raise ValueError(f"port {plane + 1} (plane {plane}) has no carrier")
        if (peer, req_id) in self.ep_probes:
            raise ValueError(f"request {req_id} to host {peer} is still outstanding")
        ctl = wire.Control(0, 0, 0, ev, 0, self._port_state)
        self.control_out.append((plane, peer, ev, wire.encode_control(
            protocol.PROBE, 0, plane, 0, EP_PROBE_CONN, ev, 0, req_id, ctl), protocol.CONTROL))
        self.ep_probes[(peer, req_id)] = (now, deadline)

    def _ep_reply(self, plane: int, src: int, req_id: int, now: float) -> None:
        sent = self.ep_probes.pop((src, req_id), None)
        if sent is not None and self.on_ep_response is not None:
            self.on_ep_response(src, req_id, plane, now - sent[0], now)

    def _ep_expire(self, now: float) -> None:
        for key, (_, deadline) in list(self.ep_probes.items()):
            if now >= deadline:
                del self.ep_probes[key]
                if self.on_ep_response is not None:
                    self.on_ep_response(key[0], key[1], None, None, now)

    # ------------------------------------------------------------------ timers
    # A sender has work for poll() only when a packet waits that only pacing holds back
    # (`_working`), or when its timer is due (timer_at: MRC's next loss check or a
    # plane's reordering timer; a RoCE queue pair's pacing, timeout or route change),
    # while it is busy. Both change only when the endpoint calls into the sender or
    # changes what every sender reads (a PFC pause, a route, the line rate), which
    # marks it touched; `_refresh` then puts its due time in a heap (stale entries are
    # skipped as they surface) and its work in `_working`. poll() and next_wakeup()
    # thus cost the connections that have something to do, not every connection of the
    # host: on cluster-c's all-to-all, 64 hosts with 63 peers of 16 queue pairs each,
    # a turn that looked at every queue pair left RoCE's agents no time to send.
    def _touch(self, peer: int) -> None:
        self._touched.add(peer)
        self._sample_fresh.add(peer)

    def _touch_all(self) -> None:
        self._touched.update(self.senders)
        self._sample_fresh.update(self.senders)

    def _refresh(self, now: float) -> None:
        if not self._touched:
            return
        senders, due, timers, working = self.senders, self._due, self._timers, self._working
        for peer in self._touched:
            sender = senders[peer]
            busy = sender.busy
            when = sender.timer_at(now) if busy else None  # before has_work: RoCE's reads it
            if when != due.get(peer):
                due[peer] = when
                if when is not None:
                    self._seq += 1
                    heapq.heappush(timers, (when, self._seq, peer))
            if busy and sender.has_work():
                working.add(peer)
            else:
                working.discard(peer)
        self._touched.clear()

    def _due_senders(self, now: float) -> tuple[list[TransportSender], set[int]]:
        """The senders poll() must look at now, in the order they were made, and the
        peers among them whose timer is due."""
        self._refresh(now)
        timers, due = self._timers, self._due
        ripe = set()
        while timers and timers[0][0] <= now:
            when, _, peer = heapq.heappop(timers)
            if due.get(peer) == when:
                due[peer] = None  # polled now: _refresh schedules it again
                ripe.add(peer)
        order, senders = self._order, self.senders
        return [senders[peer] for peer in sorted(self._working | ripe,
                                                 key=order.__getitem__)], ripe

    def set_local_plane(self, plane: int, up: bool, now: float) -> None:
        if self.local_up[plane] == up:
            return
        self.local_up[plane] = up
        self._port_state = sum(1 << p for p, up in enumerate(self.local_up) if up)
        self.on_event({"t": now, "event": "local-plane-up" if up else "local-plane-down",
                       "plane": plane})
        self.routes.local_plane(plane, up, now)
        for peer, sender in self.senders.items():
            sender.set_local_plane(plane, up, now)
            self._touch(peer)
        # Tell every peer on every plane still up, so they stop (or resume) using it.
        state = self.port_state()
        for peer in sorted(self.peers_seen | set(self.senders)):
            for p in range(self.planes):
                if self.local_up[p]:
                    ev = make_ev(p, 0)
                    ctl = wire.Control(0, 0, 0, ev, 0, state)
                    self.control_out.append((p, peer, ev, wire.encode_control(
                        protocol.PLANE_STATUS, 0, p, 0, self._conn_id(peer), ev, 0, 0, ctl),
                        self.spec.control_class))

    def route_event(self, kind: str, paths, now: float, delay_s: float | None = None) -> None:
        """The fabric's routing learned that `paths` ((destination, plane, spine or
        None) each) went down or came back (`kind`: local-down, local-up, remote-down,
        remote-up; hosts/baseline.py). The baseline's queue pairs follow after the
        kind's delay, or `delay_s` if given; MRC finds paths by its own packets and
        takes no notice."""
        due = self.routes.event(kind, paths, now, delay_s)
        self._touch_all()  # a RoCE queue pair moves when the change takes effect
        self.on_event({"t": now, "event": "route", "kind": kind, "paths": len(paths),
                       "effective": due})

    def port_state(self) -> int:
        return self._port_state

    def set_line_share(self, share: float) -> None:
        """The NIC's ports run at `share` of their line rate from now on (on the
        single-plane twin, a port that lost some of the lanes the planes' ports stand
        for): every sender paces to it, as a NIC paces to its port's speed, so the
        host's own queue does not drop what the port can no longer carry."""
        if not 0 < share <= 1:
            raise ValueError(f"a line share is above 0 and at most 1 (got {share})")
        self.line_share = share
        rate_mbit = self.fabric.spec.host_t0.rate_mbit
        self.pacer.set_rate(rate_mbit * share,
                            self.config.mtu_payload + protocol.MRC_HEADER_BYTES)
        for sender in self.senders.values():
            sender.set_line_rate(share * rate_mbit * 1e6 / 8)
        self._touch_all()

    def pause(self, plane: int, on: bool, now: float) -> None:
        """PFC at this host's NIC port of `plane` (the switch it faces is past XOFF for
        the lossless class): the baseline's data waits there until resumed."""
        if on == (plane in self.paused):
            return
        (self.paused.add if on else self.paused.discard)(plane)
        self._touch_all()  # the baseline's queue pairs of the plane wait, or go again
        self.on_event({"t": now, "event": "pfc-pause" if on else "pfc-resume", "plane": plane})

    def stats(self) -> dict:
        total = dict(self.counters)
        for part in (*self.senders.values(), *self.receivers.values()):
            for key, value in part.stats.items():
                total[key] = total.get(key, 0) + value
        return total

    def path_states(self, dst: int | None = None) -> dict[int, list[dict]]:
        """The EVs this host sends on, per peer (or towards `dst` only): each EV's
        plane, path (its choice within the plane) and state. `active` EVs are in the
        rotation; the others are spares that replace a retired one. The baseline has
        one EV in use per queue pair, its current path."""
        states = {}
        for peer, sender in self.senders.items():
            if dst is not None and peer != dst:
                continue
            states[peer] = sender.path_states(self._paths_to(peer))
        return states

    def paths_in_use(self) -> dict[int, int]:
        """Per peer, the distinct paths the connection to it sprays over now: the (plane,
        path) of the EVs path_states() reports `active` (an MRC EV in the rotation, a
        baseline queue pair not in error) on planes whose port is up at this host. For
        the agent's `stats` at the end of a run: it walks every EV, so never per packet."""
        counts = {}
        for peer, sender in self.senders.items():
            states = sender.path_states(self._paths_to(peer))
            counts[peer] = len({(s["plane"], s["path"]) for s in states if s["active"]
                                and s["state"] != "ERROR" and self.local_up[s["plane"]]})
        return counts

    def progress(self) -> dict:
        """A sample for the event log (every `progress_s` in the agent, and at each
        delivery, so it costs what changed since the last, not every connection):
        payload bytes received in all (`rx_bytes`) and per source host (`rx_by_src`,
        sources that sent nothing left out), EVs retired, mean smoothed RTT."""
        seen, by_src = self._rx_seen, self._rx_by_src
        for receiver in self._rx_fresh:
            nbytes = receiver.stats["rx_bytes"]
            grown = nbytes - seen.get(receiver, 0)
            if grown:
                seen[receiver] = nbytes
                by_src[receiver.peer] = by_src.get(receiver.peer, 0) + grown
                self._rx_total += grown
        self._rx_fresh.clear()
        retired, srtts = self._retired_of, self._srtt_of
        for peer in self._sample_fresh:
            sender = self.senders.get(peer)
            if sender is not None:
                retired[peer] = sender.retired_paths()
                if sender.srtt:
                    srtts[peer] = sender.srtt
                else:
                    srtts.pop(peer, None)
        self._sample_fresh.clear()
        return {"rx_bytes": self._rx_total, "rx_by_src": dict(by_src),
                "bad_paths": sum(retired.values()),
                "srtt_ms": round(1000 * sum(srtts.values()) / len(srtts), 3) if srtts else None}

    # ------------------------------------------------------------------ helpers
    def _paths_to(self, peer: int) -> int:
        """Paths per plane to `peer` (cached)."""
        paths = self.paths_to.get(peer)
        if paths is None:
            paths = self.paths_to[peer] = choices_per_plane(self.fabric, self.me, peer)
        return paths

    def _path_index(self, peer: int, ev: int) -> int:
        return path_index(ev, self._paths_to(peer))

    def _due_acks(self, now: float) -> None:
        """Answer every group of pending SACKs that is due."""
        pending, soonest = self.pending_acks, float("inf")
        for key, group in list(pending.items()):
            if group[2] <= now:
                del pending[key]
                self._sack_group(key, group[0], group[1], group[3])
            elif group[2] < soonest:
                soonest = group[2]
        self.acks_due = soonest

    def _sack_group(self, key: tuple[int, ...], hdr: wire.Header, psns: list[int],
                    plane: int) -> None:
        """Answer a group of packets of one connection (`key` starts with its receiver's
        key) on `plane`, the latest packet's: one SACK (for the latest, echoing its EV)
        whose cumulative PSN and bitmap cover them all when they lie within 64 PSNs of
        the cumulative point; a packet farther ahead gets a SACK whose bitmap starts at
        it (and covers whatever else of the group is within 64 PSNs of it)."""
        src = key[0]
        receiver = self.receivers[key[:3]]
        self._answer(protocol.SACK, 0, 0, plane, src, hdr, receiver.control(hdr.ev,
                                                                          self._port_state))
        covered = receiver.cum + protocol.BITMAP_BITS
        for psn in sorted(psns):
            if psn >= covered and psn != hdr.psn:
                ctl = receiver.control(hdr.ev, self._port_state, base=psn)
                self._answer(protocol.SACK, 0, 0, plane, src, hdr._replace(psn=psn), ctl)
                covered = psn + protocol.BITMAP_BITS

    def _conn_id(self, peer: int) -> int:
        return (self.me << 16) | peer

    def _sender(self, peer: int) -> TransportSender:
        sender = self.senders.get(peer)
        if sender is None:
            paths = choices_per_plane(self.fabric, self.me, peer)

            def completed(msg_id: int, size: int, took: float, peer=peer) -> None:
                self.on_completed(peer, msg_id, size)

            if self.qps:
                sender = self._roce_sender(peer, completed)
            else:
                def error(now: float, peer=peer) -> None:
                    self.on_qp_error(peer, 0, now)

                sender = Sender(self.me, peer, self._conn_id(peer), self.planes, paths,
                                self.config, self.on_event, completed,
                                classes=(self.spec.data_class, self.spec.retransmit_class),
                                shortest=shortest_choices(self.fabric, self.me, peer),
                                on_error=error)
            for plane, up in enumerate(self.local_up):
                if not up:
                    sender.set_local_plane(plane, False, 0.0)
            self.senders[peer] = sender
            self._order[peer] = len(self._order)
            self._touch(peer)
            if self.on_new_sender is not None:
                self.on_new_sender(peer, sender)
        return sender

    def _roce_sender(self, peer: int, completed) -> RoceSender:
        def qp_error(qp, now: float, peer=peer) -> None:
            self.on_qp_error(peer, qp.index, now)

        line_rate_Bps = self.line_share * self.fabric.spec.host_t0.rate_mbit * 1e6 / 8
        return RoceSender(self.me, peer, self._conn_id(peer), self.fabric, self.config,
                          self.on_event, completed, qps=self.qps, line_rate_Bps=line_rate_Bps,
                          routes=self.routes, dcqcn=self.spec.dcqcn, on_qp_error=qp_error,
                          paused=self.paused)

    def _receiver(self, peer: int, conn_id: int, qp: int = 0) -> Receiver:
        key = (peer, conn_id, qp)
        receiver = self.receivers.get(key)
        if receiver is None:
            # The QPs of a connection fill the same message buffers (their first's).
            first = self._receiver(peer, conn_id) if qp else None
            receiver = Receiver(peer, conn_id,
                                lambda msg_id, data, peer=peer: self.on_delivered(peer, msg_id,
                                                                                  data),
                                in_order=bool(self.qps), first_psn=qp << QP_PSN_SHIFT,
                                messages=first.messages if first else None,
                                delivered=first.delivered if first else None)
            self.receivers[key] = receiver
        return receiver

    def _answer(self, kind: int, flags: int, reason: int, plane: int, dst: int,
                hdr: wire.Header, ctl: wire.Control) -> None:
        # The answer goes back on the plane it came in on (if that plane is down here, on
        # the first plane that is up), along the mirror of the data path, except where
        # MRC's reverse EV set (hosts/reverse.py) knows better. A RoCE answer takes the
        # path the fabric's ECMP gives its queue pair's flow back.
        if not self.local_up[plane]:
            plane = next((p for p, up in enumerate(self.local_up) if up), plane)
        if self.qps:
            evs = [self._ecmp_back(dst, plane, hdr.psn >> QP_PSN_SHIFT, hdr.ev)]
        else:
            ev = hdr.ev if ev_plane(hdr.ev) == plane else make_ev(plane, ev_choice(hdr.ev))
            reverse = self._reverse_set(dst)
            evs = (reverse.reply_evs(plane, ev) if kind == protocol.PROBE_REPLY
                   else [reverse.answer_ev(plane, ev)])
        cls = protocol.ROCE_CNP if kind == protocol.CNP else self.spec.control_class
        for ev in evs:
            data = wire.encode_control(kind, flags, plane, reason, hdr.conn_id, ev, hdr.msg_id,
                                       hdr.psn, ctl, hdr.offset, hdr.msg_len)
            self.control_out.append((plane, dst, ev, data, cls))


    # ------------------------------------------------------------------ RoCE answers
    def _ecmp_back(self, peer: int, plane: int, qp: int, data_ev: int) -> int:
        """The EV of the path ECMP gives queue pair `qp`'s flow from here to `peer`
        among those this host's routing offers (the data's mirror if it offers none).
        Worked out once per flow while routing stays as it is: hashing the flow's
        addresses for every answer cost RoCE's agents a fifth of their CPU on a 64-host
        ring."""
        key, version = (peer, plane, qp), self.routes.version
        known = self._ecmp_back_paths.get(key)
        if known is None or known[0] != version:
            path = ecmp_path(self.fabric, self.me, peer, plane,
                             qp_flow_port(self.me, peer, qp),
                             lambda p: self.routes.usable((peer, p.plane, p.spine)))
            known = self._ecmp_back_paths[key] = (version, None if path is None else path.ev)
        return known[1] if known[1] is not None else make_ev(plane, ev_choice(data_ev))

    def _cnp(self, peer: int, hdr: wire.Header, plane: int, qp: int, now: float) -> None:
        """DCQCN's notification point: a CE-marked packet of a queue pair gets a CNP back,
        at most one per `cnp_interval_s` (none without DCQCN: the -pfc transports)."""
        if not self.spec.dcqcn:
            return
        key = (peer, hdr.conn_id, qp)
        if now - self.cnp_at.get(key, float("-inf")) < self.config.cnp_interval_s:
            return
        self.cnp_at[key] = now
        ctl = wire.Control(0, 0, 0, hdr.ev, 1, self._port_state)
        self._answer(protocol.CNP, 0, 0, plane, peer, hdr._replace(psn=qp << QP_PSN_SHIFT),
                     ctl)

    # ------------------------------------------------------------------ reverse EVs
    def _peer_conn_id(self, peer: int) -> int:
        """The id of the peer's connection to this host (what its data carries)."""
        return (peer << 16) | self.me

    def _reverse_set(self, peer: int) -> ReverseEvs:
        reverse = self.reverse.get(peer)
        if reverse is None:
            paths = self.paths_to.get(peer) or choices_per_plane(self.fabric, self.me, peer)
            rng = random.Random(f"reverse/{self.config.ev_seed}/{self.me}/{peer}")
            # Reverse probes keep to the paths data may take (a same-rack pair's direct
            # path, unless rack_local_paths is "all").
            choices = shortest_choices(self.fabric, self.me, peer)
            if self.config.rack_local_paths == "all" or len(choices) == paths:
                choices = None
            reverse = self.reverse[peer] = ReverseEvs(self.planes, paths,
                                                      self.config.reverse_probe_s, rng,
                                                      choices)
        return reverse

    def _reverse_probes(self, peer: int, reverse: ReverseEvs, now: float) -> None:
        for ev in reverse.due_probes(now):
            plane = ev_plane(ev)
            if not self.local_up[plane]:
                continue
            ctl = wire.Control(0, 0, 0, ev, 0, self._port_state)
            self.control_out.append((plane, peer, ev, wire.encode_control(
                protocol.PROBE, 0, plane, 0, self._peer_conn_id(peer), ev, 0, 0, ctl),
                protocol.CONTROL))
            self.counters["reverse_probes"] += 1


def make_endpoint(transport: str, me: int, fabric: Fabric, overrides: dict, on_event,
                  on_delivered, on_completed, on_qp_error=None) -> Endpoint:
    config = ProtocolConfig.with_overrides(overrides)
    return Endpoint(me, fabric, transport, config, on_event, on_delivered, on_completed,
                    on_qp_error)
