"""The MRC sender of one connection (pure logic, injectable clock, no sockets).

Messages are cut into packets with fixed PSNs; each transmission sprays onto the next
EV of the rotation (hosts/evset.py). The receiver acknowledges every packet with a SACK
echoing its EV, so the sender learns per EV what arrived:

- packets passed on the same EV by `reorder_tolerance` later acknowledged ones, or a
  retransmission timeout: a real loss -> the EV's path is retired (ASSUMED_BAD),
  replaced by an EV of the same plane, and what was in flight on it goes out again on
  other EVs;
- a packet sent a reordering window before one acknowledged on any EV, or older than
  its path's srtt + 4 rttvar when a later one of its plane was acknowledged: late,
  perhaps lost -> sent again elsewhere at once, its path held out of use and probed;
  the probe's reply puts the path back, no reply in time retires it (`_late`);
- a NACK (the packet was trimmed): retransmit at once on another EV, SKIP the EV once;
- an ECN echo: SKIP the EV once; an EV whose acks keep echoing ECN (at least
  `ecn_migrate_marks` of the acks of its latest `ecn_migrate_acks` packets) is migrated:
  a fresh EV of its plane on the least used path takes its slot. Neither ever retires
  anything: congestion is not failure;
- a SACK with ALWAYS_SKIP (the receiver judges the echoed EV persistently bad: it is
  missing a share of what was sent on its path, hosts/receiver.py): a real loss verdict, the
  EV's path is retired at once (reason `always-skip`);
- retired paths are probed with backoff, and return only after `probe_successes`
  replies in a row, each on time and unmarked, at least `probe_spacing_s` apart
  (hosts/evset.py; with `probes` off, as in mrc-no-probe, nothing is ever probed:
  retired paths stay retired);
- a packet that times out more often than OCP MRC's retry counts allow
  (`retry_linear_cnt` + `retry_exp_cnt`, forever by default) ends the connection, as a
  queue pair in the error state (`on_error`);
- the local carrier (`set_local_plane`) and the peer's port-state bitmap take whole
  planes out of use and back; a plane the peer reported down is probed, so a lost
  PLANE_STATUS cannot keep it out of use forever.

The caller drives it: `send_message()`, `on_packet()` (or on_sack/on_nack/
on_probe_reply) with decoded packets, and `poll(now)`, which returns the packets to send
now as (plane, ev, bytes, traffic class) tuples: data in the transport's class,
retransmissions in its retransmission class (TRIMMABLE_RETX for MRC), probes in
CONTROL (hosts/protocol.py). Events go to `on_event(dict)`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import NamedTuple

from hosts import protocol, wire
from hosts.cc import make_window
from hosts.config import ACK_TIMEOUT_MAX, RETRY_EXP_INFINITE, ConfigError, ProtocolConfig
from hosts.evset import ASSUMED_BAD, DENIED, GOOD, SKIP, Ev, EvSet, PathKey
from hosts.protocol import make_ev

EventCallback = Callable[[dict], None]
CompletedCallback = Callable[[int, int, float], None]  # (msg_id, bytes, seconds taken)
PlaneReady = Callable[[int], bool]
Charge = Callable[[int, int], None]  # (plane, datagram bytes) as each packet is made
Outgoing = tuple[int, int, bytes, int]  # (plane, ev, datagram, traffic class)


# The sequence numbers of the probes that check a held path (_late): the top bit set,
# apart from those of retired paths' probes (hosts/evset.py, counting from 0).
SUSPECT_SEQ = 1 << 31
SUSPECT_SEQ_MASK = SUSPECT_SEQ - 1


class Suspect(NamedTuple):
    """A path held while its probe asks whether a late packet was lost (Sender._late)."""

    deadline: float  # no answer by then retires the path
    seq: int  # the probe's sequence number
    reason: str  # late or late-in-plane: the retirement's reason
    ev: Ev  # an EV of the path
    late: Packet  # the late packet
    late_sent_at: float  # when it left on the path (a copy went out since)


def _always(plane: int) -> bool:
    return True


def _uncharged(plane: int, size: int) -> None:
    pass


_sent_at = attrgetter("sent_at")
_F_LAST, _F_RETRANSMIT = protocol.F_LAST, protocol.F_RETRANSMIT
_VT_DATA = protocol.VERSION << 4 | protocol.DATA
_PATH_SEQ_SHIFT, _PATH_SEQ_MASK = protocol.PATH_SEQ_SHIFT, protocol.PATH_SEQ_MASK
_pack_header = wire.HEADER.pack


def smooth_rtt(srtt: float, rttvar: float, sample: float) -> tuple[float, float]:
    """Smoothed RTT and its variation after one more sample (RFC 6298); 0 is unset."""
    if not srtt:
        return sample, sample / 2
    return 0.875 * srtt + 0.125 * sample, 0.75 * rttvar + 0.25 * abs(srtt - sample)


class SenderError(ValueError):
    """A message the connection cannot take (reused id, too large)."""


class Packet:
    __slots__ = ("psn", "msg", "offset", "length", "last", "ev", "sent_at", "retries",
                 "timeouts", "acked", "passed", "queued", "tx_seq")

    def __init__(self, psn: int, msg: Message, offset: int, length: int, last: bool):
        self.psn, self.msg, self.offset, self.length, self.last = psn, msg, offset, length, last
        self.ev: Ev | None = None  # the EV of the transmission in flight, if any
        self.sent_at = 0.0
        self.retries = 0
        self.timeouts = 0  # of its retransmission timer (OCP MRC's retry counts)
        self.acked = False
        self.passed = 0  # later packets on the same EV acknowledged before it
        self.queued = False
        self.tx_seq = 0  # order of its latest transmission among the connection's


class Message:
    """A queued message. Its packets get their PSNs when it is queued but become Packet
    objects only when first sent, so queueing a large message costs O(1), not a stall
    of the event loop while other connections wait for their acks."""

    __slots__ = ("msg_id", "data", "size", "remaining", "started", "first_psn", "count",
                 "next_index")

    def __init__(self, msg_id: int, data: bytes, started: float, packets: int,
                 first_psn: int):
        self.msg_id, self.data, self.size = msg_id, memoryview(data), len(data)
        self.remaining, self.started = packets, started
        self.first_psn, self.count, self.next_index = first_psn, packets, 0


class Sender:
    """The sending side of one connection (this host -> peer).

    `planes` and `paths_per_plane` describe the fabric between the two hosts (the agent
    takes them from the path catalogue); EV values follow the rule of topologies/paths.py.
    `shortest` are the indices of the plane's shortest paths (topologies/paths.py
    `shortest_choices`; None: every path): where they are not all of them (a same-rack
    pair), `rack_local_paths` decides whether the others are used never, as a fallback,
    or alike. `on_error(now)` hears of the connection giving up (retry counts).
    """

    def __init__(self, me: int, peer: int, conn_id: int, planes: int, paths_per_plane: int,
                 config: ProtocolConfig, on_event: EventCallback,
                 on_completed: CompletedCallback, seed: int = 0,
                 classes: tuple[int, int] = (protocol.TRIMMABLE, protocol.TRIMMABLE_RETX),
                 shortest: Sequence[int] | None = None,
                 on_error: Callable[[float], None] | None = None):
        self.me, self.peer, self.conn_id = me, peer, conn_id
        self.on_error = on_error or (lambda now: None)
        self.failed = False  # gave up (retry counts): sends nothing more
        self.data_class, self.retransmit_class = classes
        self.config = config
        self.on_event = on_event
        self.on_completed = on_completed
        # The EV set is drawn from the configured seed and the connection's identity:
        # runs repeat exactly, and different connections (senders do not coordinate)
        # draw different sets. An explicit `seed` (tests) replaces both.
        rng = random.Random(seed or f"ev-set/{config.ev_seed}/{me}/{peer}/{conn_id}")
        if config.pin_path is not None and config.pin_path[0] >= planes:
            raise ConfigError(f"protocol.pin_path: plane {config.pin_path[0]}, but the "
                              f"topology has {planes} planes (0..{planes - 1})")
        preferred, fallback = None, ()
        if shortest is not None and len(shortest) < paths_per_plane:
            others = tuple(p for p in range(paths_per_plane) if p not in shortest)
            if config.rack_local_paths == "direct":
                preferred = shortest
            elif config.rack_local_paths == "fallback":
                preferred, fallback = shortest, others
        self.evs = EvSet(planes, paths_per_plane, config.evs_for(planes), rng,
                         pin=config.pin_path, preferred=preferred, fallback=fallback)
        # RTT samples per path: a path's own bounds judge its packets only once it has
        # rtt_min_samples of them (_late_on_plane, _check_losses).
        self.path_samples: dict[PathKey, int] = {}
        self.ecn_mask = (1 << config.ecn_migrate_acks) - 1
        self.ecn_migrate_marks = config.ecn_migrate_marks
        self.congested: list[Ev] = []  # EVs the migration rule picked during this SACK
        # DATA packets sent on each path so far: their `path_seq` (the receiver's view of
        # what each path should have brought it).
        self.path_sent: dict[PathKey, int] = {}
        self.local_up = [True] * planes
        self.remote_up = [True] * planes
        self.remote_state = (1 << planes) - 1  # the peer's port-state bitmap, as last seen
        self.remote_probe_at = [0.0] * planes  # next probe of a plane the peer said is down
        self.remote_probe_wait = [config.probe_initial_s] * planes
        self.packets: dict[int, Packet] = {}  # unacknowledged, by PSN
        self.msg_ids: set[int] = set()
        self.next_psn = 0
        self.cum_acked = 0  # every PSN below this one is acknowledged
        self.acked_above = 0  # bit i: PSN cum_acked + i is acknowledged
        self.unsent: deque[Message] = deque()  # messages with packets never sent
        self.retx: deque[Packet] = deque()
        self.inflight = 0
        self.tx_count = 0  # transmissions so far (Packet.tx_seq)
        self.cwnd = make_window(config)
        self._ecn_psn = -1  # the PSN whose SACK echoed ECN, until its ack reaches the window
        self.srtt = 0.0
        self.rttvar = 0.0
        self.next_check = 0.0
        self.rack_sent_at = 0.0  # send time of the latest-sent packet acknowledged so far
        self.plane_rack = [0.0] * planes  # the same, per plane
        self.path_rack: dict[PathKey, float] = {}  # the same, per path
        # When a packet passed within its plane becomes late enough to count as lost
        # (the reordering timer of RACK): the plane is checked again then, ack or not.
        self.plane_recheck = [float("inf")] * planes
        self.recheck_at = float("inf")  # the earliest of them
        # Paths held while a probe asks whether a late packet was lost (_late), and
        # those probes, to go out in the next poll.
        self.suspects: dict[PathKey, Suspect] = {}
        self.suspect_probes: list[tuple[int, int, int]] = []
        self.packet_events = config.packet_events
        self.stats = {"data_tx": 0, "retransmits": 0, "acked": 0, "nacks": 0, "ecn_echoes": 0,
                      "losses": 0, "timeouts": 0, "retired": 0, "reinstated": 0, "probes": 0,
                      "messages_completed": 0, "stale_acks": 0, "migrations": 0,
                      "always_skip_rx": 0, "probe_failures": 0, "qp_errors": 0,
                      "late": 0, "late_cleared": 0}

    # ------------------------------------------------------------------ messages
    def send_message(self, msg_id: int, data: bytes, now: float) -> None:
        """Queue a message; completion is reported when every packet is acknowledged.
        Message ids must be unique within the connection (the receiver keeps them)."""
        if msg_id in self.msg_ids:
            raise SenderError(f"message id {msg_id} already used on connection "
                              f"{self.conn_id:#x}")
        if not 0 <= msg_id <= 0xFFFFFFFF:
            raise SenderError(f"message id {msg_id} does not fit 32 bits")
        if len(data) > protocol.MAX_MSG_LEN:
            raise SenderError(f"message of {len(data)} bytes; the limit is {protocol.MAX_MSG_LEN}")
        self.msg_ids.add(msg_id)
        mtu = self.config.mtu_payload
        count = max(1, -(-len(data) // mtu))
        self.unsent.append(Message(msg_id, data, now, count, self.next_psn))
        self.next_psn += count

    @property
    def busy(self) -> bool:
        """Anything left to do: packets unacknowledged, paths to probe, planes to recheck."""
        return not self.failed and (bool(self.packets) or bool(self.unsent) or bool(self.evs.bad)
                or not all(self.remote_up))

    def has_work(self) -> bool:
        """Something to send that only pacing holds back (not the window)."""
        return (not self.failed and bool(self.retx or self.unsent)
                and self.cwnd.allows(self.inflight))

    @property
    def resending(self) -> bool:
        """Retransmissions are queued (the pacer lets them a little ahead of new data)."""
        return bool(self.retx)

    def wanted_planes(self) -> list[int]:
        """Planes a packet could go out on now (up, with an EV in the rotation): the
        event loop waits for one of them, never for a plane whose paths are all retired."""
        return self.evs.sendable

    # ------------------------------------------------------------------ sending
    def poll(self, now: float, plane_ready: PlaneReady = _always, budget: int = 64,
             charge: Charge = _uncharged,
             resend_ready: PlaneReady | None = None) -> list[Outgoing]:
        """Packets to send now, at most `budget` DATA packets (probes come on top).
        `plane_ready(plane)` says whether a plane may take a packet now, and each
        packet is charged to its plane as it is made (`charge(plane, size)`), so the
        answers of plane_ready follow the packets of this very poll (pacing).
        Retransmissions ask `resend_ready` instead, if given: they may go a little
        ahead of new data."""
        out: list[Outgoing] = []
        if self.failed:
            return out
        if now >= self.recheck_at:
            self._recheck_planes(now)
        if now >= self.next_check:
            self.next_check = now + self.config.tick_s
            self._check_losses(now)
            if self.config.probes:
                self._probe(now, out)
        if self.suspects:
            self._confirm(now, out)
        retx, unsent, pick = self.retx, self.unsent, self.evs.pick
        resend_ready = resend_ready or plane_ready
        # The window does not move while packets go out (acks move it), so its bound
        # is read once: cwnd.allows(inflight) is inflight < bound.
        cwnd = self.cwnd
        bound = cwnd.cwnd if cwnd.enabled else cwnd.limit
        transmit, append = self._transmit, out.append
        data_class, retransmit_class = self.data_class, self.retransmit_class
        while budget > 0 and (retx or unsent) and self.inflight < bound:
            if retx:
                pkt = retx[0]
                if pkt.acked:
                    retx.popleft()
                    pkt.queued = False
                    continue
                ev = pick(resend_ready)
                if ev is None:
                    break
                retx.popleft()
                pkt.queued = False
            else:
                ev = pick(plane_ready)
                if ev is None:
                    break
                pkt = self._next_new()
            data = transmit(pkt, ev, now)
            plane = ev.plane
            charge(plane, len(data))
            append((plane, ev.ev, data, retransmit_class if pkt.retries else data_class))
            budget -= 1
        return out

    def _next_new(self) -> Packet:
        """The next never-sent packet of the oldest queued message."""
        msg = self.unsent[0]
        index = msg.next_index
        msg.next_index = index + 1
        if index + 1 == msg.count:
            self.unsent.popleft()
        mtu = self.config.mtu_payload
        offset = index * mtu
        psn = msg.first_psn + index
        pkt = self.packets[psn] = Packet(psn, msg, offset, min(mtu, msg.size - offset),
                                         index + 1 == msg.count)
        return pkt

    def _transmit(self, pkt: Packet, ev: Ev, now: float) -> bytes:
        retries = pkt.retries
        flags = (_F_LAST if pkt.last else 0) | (_F_RETRANSMIT if retries else 0)
        pkt.ev, pkt.sent_at, pkt.passed = ev, now, 0
        # Transmission order, not send time: packets of one poll share a timestamp.
        self.tx_count = pkt.tx_seq = self.tx_count + 1
        ev.last_sent = now
        key = ev.key
        path_sent = self.path_sent
        sent = path_sent.get(key, 0)
        path_sent[key] = sent + 1
        ev.inflight += 1
        ev.outstanding.append(pkt)
        self.inflight += 1
        stats = self.stats
        stats["data_tx"] += 1
        if retries:
            stats["retransmits"] += 1
        if self.packet_events:
            self.on_event({"t": now, "event": "send", "psn": pkt.psn, "ev": ev.ev,
                           "plane": ev.plane, "retransmit": bool(retries),
                           "peer": self.peer})
        msg, offset, length = pkt.msg, pkt.offset, pkt.length
        # wire.encode_data, inlined: the header, then the payload (one copy of it).
        return _pack_header(_VT_DATA, flags, ev.plane, 0, self.conn_id, ev.ev, msg.msg_id,
                            pkt.psn, offset, msg.size, length,
                            (key[1] & _PATH_SEQ_MASK) << _PATH_SEQ_SHIFT
                            | (sent & _PATH_SEQ_MASK)) + msg.data[offset:offset + length]

    def _take_back(self, pkt: Packet, front: bool) -> None:
        """A transmission is over without an ack: queue the packet again."""
        if pkt.ev is not None:
            pkt.ev.inflight -= 1
            self.inflight -= 1
            pkt.ev = None
        pkt.retries += 1
        if not pkt.queued:
            pkt.queued = True
            (self.retx.appendleft if front else self.retx.append)(pkt)

    # ------------------------------------------------------------------ feedback
    def on_packet(self, hdr: wire.Header, ctl: wire.Control | None, now: float) -> None:
        """Feed one decoded control packet of this connection (SACK, NACK, PROBE_REPLY,
        PLANE_STATUS); anything else is ignored."""
        if ctl is None:
            return
        kind = hdr.type
        if kind == protocol.SACK:
            self.on_sack(hdr, ctl, now)
        elif kind == protocol.NACK:
            self.on_nack(hdr, ctl, now)
        elif kind == protocol.PROBE_REPLY:
            self.on_probe_reply(hdr, ctl, now)
        elif kind == protocol.PLANE_STATUS:
            self.remote_ports(ctl.port_state, now)

    def on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        self.remote_ports(ctl.port_state, now)
        ecn = bool(hdr.flags & protocol.F_ECN_ECHO)
        # The echo is about the packet this SACK answers: the window hears it with
        # that packet's RTT (ECN and delay together), or alone if it was acked before.
        self._ecn_psn = hdr.psn if ecn else -1
        self._on_sack(hdr, ctl, now)
        if self._ecn_psn >= 0:
            self._ecn_psn = -1
            self.cwnd.on_ack(None, True, now)
        if self.congested:
            congested, self.congested = self.congested, []
            for ev in congested:
                self._migrate(ev, now)
        if hdr.flags & protocol.F_ALWAYS_SKIP:
            # After the acks above, so what this SACK acknowledges is not sent again.
            self.stats["always_skip_rx"] += 1
            ev = self.evs.by_ev.get(ctl.echo_ev)
            if ev is not None:
                self._retire_path(ev, now, "always-skip")

    def _on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        if hdr.flags & protocol.F_ECN_ECHO:
            self.stats["ecn_echoes"] += 1
            ev = self.evs.by_ev.get(ctl.echo_ev)
            if ev is not None:
                ev.ecn_marks += 1
                if ev.state == GOOD:
                    ev.state = SKIP
                    self.on_event({"t": now, "event": "skip", "ev": ev.ev, "plane": ev.plane,
                                   "reason": "ecn", "peer": self.peer})
        newly: list[Packet] = []
        ack = self._ack
        # Everything this SACK acknowledges, as a bitmap relative to cum_acked, less what
        # is known acknowledged already: only new acks cost work, however many PSNs a
        # SACK repeats. Nothing at or past the first never-sent PSN counts, so a forged
        # or corrupt SACK can neither make us walk billions of PSNs nor move the
        # cumulative point past what was sent (later real SACKs would not ack it).
        base = self.cum_acked
        unsent = self.unsent
        span = (unsent[0].first_psn + unsent[0].next_index if unsent else self.next_psn) - base
        if span <= 0:
            return
        cum = ctl.cum_psn - base
        want = (1 << min(cum, span)) - 1 if cum > 0 else 0
        psn = hdr.psn - base
        if 0 <= psn < span:
            want |= 1 << psn
        shift = ctl.sack_base - base
        if ctl.bitmap and shift < span:
            want |= ctl.bitmap << shift if shift >= 0 else ctl.bitmap >> -shift
        want &= (1 << span) - 1
        fresh = want & ~self.acked_above
        if not fresh:
            return
        known = self.acked_above | fresh
        while fresh:
            low = fresh & -fresh
            ack(base + low.bit_length() - 1, now, newly)
            fresh ^= low
        run = (~known & (known + 1)).bit_length() - 1  # trailing ones: the new cum point
        self.acked_above = known >> run
        self.cum_acked = base + run
        # One SACK may answer many packets; judge gaps in the order they were sent (PSN
        # order differs once retransmissions are in flight).
        if len(newly) > 1:
            newly.sort(key=_sent_at)
        racks, path_racks, suspects = self.plane_rack, self.path_rack, self.suspects
        advanced = set()
        for pkt in newly:
            ev = pkt.ev
            # Only first transmissions move the latest acknowledged send times: an ack
            # of a retransmitted packet may answer the original, and would make
            # everything sent since look lost.
            first = pkt.retries == 0
            if first:
                sent_at = pkt.sent_at
                if sent_at > self.rack_sent_at:
                    self.rack_sent_at = sent_at
                if sent_at > racks[ev.plane]:
                    racks[ev.plane] = sent_at
                    advanced.add(ev.plane)
                key = ev.key
                if sent_at > path_racks.get(key, 0.0):
                    path_racks[key] = sent_at
                    if suspects and key in suspects:
                        self._passed_on_path(key, sent_at, now)
            outstanding = ev.outstanding
            if outstanding and outstanding[0] is pkt:
                # The oldest on its EV: nothing was passed (the usual case of _detect_gaps).
                del outstanding[0]
                continue
            # Gaps are judged by an ack of a first transmission, or of a resend that
            # this very SACK answers (its PSN, on the EV it went out on). Any other ack
            # of a resent packet may answer its first transmission (a timeout that
            # fired on a packet only queued): it would pass everything sent on the new
            # EV before the resend, which is still on its way.
            self._detect_gaps(ev, pkt, now, first
                              or (pkt.psn == hdr.psn and ev.ev == ctl.echo_ev))
        # The plane's check runs in the next poll(), once the agent has taken in every
        # answer that had arrived (it polls after each receive batch): run here, an
        # answer later in the same batch, for an earlier packet on a sibling path, would
        # not have counted yet, and after a stall of the agent's loop that packet would
        # look late.
        recheck = self.plane_recheck
        for plane in advanced:
            recheck[plane] = now
        if advanced:
            self.recheck_at = now

    def _ack(self, psn: int, now: float, newly: list[Packet]) -> None:
        pkt = self.packets.pop(psn, None)
        if pkt is None:
            return
        pkt.acked = True
        stats = self.stats
        stats["acked"] += 1
        ev = pkt.ev
        if ev is not None:
            ev.inflight -= 1
            self.inflight -= 1
            ev.last_ack = now
            ecn = psn == self._ecn_psn
            if ecn:
                self._ecn_psn = -1
            history = ev.ecn_history = (ev.ecn_history << 1 | ecn) & self.ecn_mask
            if (ecn and self.ecn_migrate_marks
                    and history.bit_count() >= self.ecn_migrate_marks):
                self.congested.append(ev)
            if pkt.retries == 0:
                sample = now - pkt.sent_at
                # _rtt, inlined (smooth_rtt for the EV and the connection).
                srtt = ev.srtt
                if srtt:
                    ev.srtt = 0.875 * srtt + 0.125 * sample
                    ev.rttvar = 0.75 * ev.rttvar + 0.25 * abs(srtt - sample)
                else:
                    ev.srtt, ev.rttvar = sample, sample / 2
                samples, key = self.path_samples, ev.key
                samples[key] = samples.get(key, 0) + 1
                srtt = self.srtt
                if srtt:
                    self.srtt = 0.875 * srtt + 0.125 * sample
                    self.rttvar = 0.75 * self.rttvar + 0.25 * abs(srtt - sample)
                else:
                    self.srtt, self.rttvar = sample, sample / 2
                self.cwnd.on_ack(sample, ecn, now)
            else:
                self.cwnd.on_ack(None, ecn, now)  # which transmission it answers is unknown
            newly.append(pkt)
        else:
            stats["stale_acks"] += 1  # the original arrived after it was taken back
        if self.packet_events:
            self.on_event({"t": now, "event": "ack", "psn": psn,
                           "ev": ev.ev if ev is not None else None, "peer": self.peer})
        msg = pkt.msg
        msg.remaining -= 1
        if msg.remaining == 0:
            stats["messages_completed"] += 1
            took = now - msg.started
            self.on_event({"t": now, "event": "complete", "msg_id": msg.msg_id,
                           "bytes": msg.size, "seconds": took, "peer": self.peer})
            self.on_completed(msg.msg_id, msg.size, took)
            msg.data = memoryview(b"")

    def _rtt(self, ev: Ev, sample: float) -> None:
        """One RTT sample, for the EV's estimate and the connection's."""
        ev.srtt, ev.rttvar = smooth_rtt(ev.srtt, ev.rttvar, sample)
        self.path_samples[ev.key] = self.path_samples.get(ev.key, 0) + 1
        self.srtt, self.rttvar = smooth_rtt(self.srtt, self.rttvar, sample)

    def _detect_gaps(self, ev: Ev, acked: Packet, now: float, judge: bool) -> None:
        """Packets sent on `ev` before `acked` and still unacknowledged were passed
        (counted only if `judge`; otherwise `acked` merely leaves the list, now or on
        the EV's next pass, which skips acknowledged packets)."""
        outstanding = ev.outstanding
        if outstanding and outstanding[0] is acked:
            del outstanding[0]  # the oldest on its EV: nothing was passed (the usual case)
            return
        if not judge:
            return
        lost = []
        keep = []
        seen = False
        tolerance = self.config.reorder_tolerance
        for pkt in ev.outstanding:
            if pkt is acked:
                seen = True  # everything after it was sent later: not passed
                continue
            if pkt.acked or pkt.ev is not ev:
                continue  # done, or since sent elsewhere
            if not seen and pkt.tx_seq < acked.tx_seq:
                # Sent before `acked` and still unacknowledged: passed. A packet resent
                # on this same EV after `acked` left (a NACKed one) still stands at its
                # first place in the list, but was not passed.
                pkt.passed += 1
                if pkt.passed >= tolerance:
                    lost.append(pkt)
                    continue
            keep.append(pkt)
        ev.outstanding = keep
        for pkt in lost:
            if pkt.ev is ev:  # not already taken back by a retirement in this loop
                self.stats["losses"] += 1
                self._loss(pkt, ev, now, "gap")

    def _migrate(self, ev: Ev, now: float) -> None:
        """The EV's path stays congested: move its slot to the least used path of its
        plane (hosts/evset.py EvSet.migrate). Its packets in flight are left to arrive."""
        new = self.evs.migrate(ev)
        if new is None:
            return
        self.stats["migrations"] += 1
        self.on_event({"t": now, "event": "migrate", "ev": ev.ev, "new_ev": new.ev,
                       "plane": ev.plane, "path": ev.key[1], "new_path": new.key[1],
                       "reason": "ecn", "peer": self.peer})

    def _loss(self, pkt: Packet, ev: Ev, now: float, reason: str) -> None:
        self._take_back(pkt, front=False)
        self.cwnd.on_loss(now)
        ev.losses += 1
        self._retire_path(ev, now, reason)

    def _late(self, pkt: Packet, ev: Ev, now: float, reason: str) -> None:
        """A packet later than its bounds allow (`late`, `late-in-plane`): sent again
        elsewhere at once, and its path held out of use while a probe asks whether it
        still delivers. The probe rides the priority queue, past the data queues that
        may hold the packet back; its reply clears the path, and no reply within the
        path's round trip plus `path_skew_s` retires it (_confirm). A late packet is
        not a lost one: on an emulated link an idle hop forwards at once, without the
        frame's serialization time, so a path's round trip goes from about a
        millisecond to tens when a few frames queue ahead of it, and retiring on
        lateness alone retired 572 EVs in 4.6 s of fault-free cross-T1 flows on
        2tier-8plane at 1.25 Mbit/s, every packet delivered. Without probes
        (mrc-no-probe) the path is retired at once."""
        if not self.config.probes or self.path_rack.get(ev.key, 0.0) > pkt.sent_at:
            # A packet sent after it on the same path has arrived: a path's packets
            # share every queue, in order, so this one was lost, not held up.
            self.stats["losses"] += 1
            self._loss(pkt, ev, now, reason)
            return
        self.stats["late"] += 1
        self._take_back(pkt, front=False)
        key = ev.key
        if key in self.suspects or ev.state not in (GOOD, SKIP):
            return  # the path's episode is under way: its window was cut once
        self.cwnd.on_loss(now)
        wait = ev.srtt + max(4 * ev.rttvar, self.config.path_skew_s, 2 * self.config.tick_s)
        seq = SUSPECT_SEQ | (self.stats["late"] & SUSPECT_SEQ_MASK)
        self.suspects[key] = Suspect(now + wait, seq, reason, ev, pkt, pkt.sent_at)
        self.evs.hold(key)
        self.suspect_probes.append((ev.plane, ev.ev, seq))
        self.on_event({"t": now, "event": "suspect", "ev": ev.ev, "plane": ev.plane,
                       "path": key[1], "reason": reason, "peer": self.peer})

    def _passed_on_path(self, key: PathKey, sent_at: float, now: float) -> None:
        """A packet sent on a held path at `sent_at` was acknowledged: if the late packet
        that got the path held was sent before it and is still unacknowledged (its
        copy sent elsewhere has not landed either), the path lost it: retired at once.
        Once the copy has landed, which of the two arrived is unknown: the probe
        decides."""
        suspect = self.suspects[key]
        if suspect.late.acked or suspect.late_sent_at >= sent_at:
            return
        self._unhold(key)
        self._held_path_lost(suspect, now)

    def _confirm(self, now: float, out: list[Outgoing]) -> None:
        """Probe the paths just held (_late), and retire those whose probe found no
        answer in time."""
        for plane, ev, seq in self.suspect_probes:
            self.stats["probes"] += 1
            out.append((plane, ev, self._probe_packet(plane, ev, seq), protocol.CONTROL))
        self.suspect_probes.clear()
        for key, suspect in list(self.suspects.items()):
            if now < suspect.deadline:
                continue
            self._unhold(key)
            if self.evs.plane_up[key[0]]:  # else its plane went down: nothing to judge
                self._held_path_lost(suspect, now)

    def _held_path_lost(self, suspect: Suspect, now: float) -> None:
        """The verdict on a held path (already released): it lost its late packet."""
        ev = self._usable_on(suspect.ev)
        if ev is not None:
            self.stats["losses"] += 1
            ev.losses += 1
            self._retire_path(ev, now, suspect.reason)

    def _unhold(self, key: PathKey) -> None:
        """The path is no longer under suspicion: its EVs take packets again."""
        del self.suspects[key]
        self.evs.release(key)

    def _usable_on(self, ev: Ev | None, key: PathKey | None = None) -> Ev | None:
        """`ev` if it is usable, else a usable EV of the rotation on its path (`key`
        when `ev` is None), else None."""
        if ev is not None and self.evs.usable(ev):
            return ev
        key = ev.key if ev is not None else key
        return next((e for e in self.evs.rotation if e.key == key and self.evs.usable(e)),
                    None)

    def _retire_path(self, ev: Ev, now: float, reason: str) -> None:
        """A real loss verdict on `ev`: retire every EV of its path (unless that would
        break the ev_min_active floor) and send what was in flight on them elsewhere."""
        if ev.state not in (GOOD, SKIP):
            return
        evs = self.evs
        if ev.key in self.suspects:
            self._unhold(ev.key)
        same_path = sum(1 for e in evs.rotation if e.key == ev.key and evs.usable(e))
        if evs.active_usable() - same_path < self.config.ev_min_active:
            self.on_event({"t": now, "event": "retire-suppressed", "ev": ev.ev,
                           "plane": ev.plane, "reason": reason, "peer": self.peer})
            return
        for retired in evs.retire(ev, now, self.config.probe_initial_s,
                                  self.config.probe_max_s):
            self.stats["retired"] += 1
            self.on_event({"t": now, "event": "retire", "ev": retired.ev, "plane": retired.plane,
                           "path": retired.key[1], "reason": reason, "peer": self.peer})
            self._resend_outstanding(retired)

    def _resend_outstanding(self, ev: Ev) -> None:
        """What is in flight on an EV that leaves use is presumed lost: send it elsewhere."""
        for other in ev.outstanding:
            if not other.acked and other.ev is ev:
                self._take_back(other, front=False)
        ev.outstanding = []

    def on_nack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        self.remote_ports(ctl.port_state, now)
        self.stats["nacks"] += 1
        self.cwnd.on_nack(now)
        pkt = self.packets.get(hdr.psn)
        ev = self.evs.by_ev.get(ctl.echo_ev)
        self.on_event({"t": now, "event": "nack", "psn": hdr.psn, "ev": ctl.echo_ev,
                       "reason": protocol.REASON_NAMES.get(hdr.reason, hdr.reason),
                       "peer": self.peer})
        if pkt is not None and pkt.ev is not None and pkt.ev.ev == ctl.echo_ev:
            # Resend at once: front of the queue. The EV is skipped below (or the rotation
            # has moved past it), so the packet goes out on another EV.
            self._take_back(pkt, front=True)
        # Trimmed on the last hop means the receiver's port is busy, not this path.
        if ev is not None and ev.state == GOOD and hdr.reason == protocol.R_TRIMMED:
            ev.state = SKIP
            self.on_event({"t": now, "event": "skip", "ev": ev.ev, "plane": ev.plane,
                           "reason": "trimmed", "peer": self.peer})

    def on_probe_reply(self, hdr: wire.Header, ctl: wire.Control, now: float,
                       ce: bool = False) -> None:
        """A reply to a probe of a retired path: a success if it answers the path's
        pending probe in time (probe_bound()) and neither it (`ce`) nor the probe
        (ECN_ECHO) was CE-marked; `probe_successes` in a row reinstate the path."""
        self.remote_ports(ctl.port_state, now)
        ev = self.evs.by_ev.get(ctl.echo_ev)
        if ev is not None and self.suspects:
            suspect = self.suspects.get(ev.key)
            if suspect is not None and suspect.seq == hdr.psn:
                # The held path answers: its packet was late, not lost.
                self._unhold(ev.key)
                self.stats["late_cleared"] += 1
                self.on_event({"t": now, "event": "suspect-cleared", "ev": ev.ev,
                               "plane": ev.plane, "path": ev.key[1], "peer": self.peer})
                return
        if ev is None or ev.key not in self.evs.bad:
            return
        config = self.config
        marked = ce or bool(hdr.flags & protocol.F_ECN_ECHO)
        bound = self.probe_bound()
        bad = self.evs.bad[ev.key]
        late = bad.pending is not None and now - bad.pending[1] > min(bound, bad.wait)
        done = self.evs.probe_answered(ev.key, hdr.psn, now, not marked, bound,
                                       config.probe_successes, config.probe_spacing_s,
                                       config.probe_max_s)
        if done is None:
            return  # a duplicate, or the answer to a probe already given up on
        if done is False and (marked or late):
            self.stats["probe_failures"] += 1
            self.on_event({"t": now, "event": "probe-failed", "ev": ev.ev, "plane": ev.plane,
                           "path": ev.key[1], "reason": "ecn" if marked else "late",
                           "peer": self.peer})
        if not done:
            return
        for back in self.evs.reinstate(ev.key, now):
            self.stats["reinstated"] += 1
            self.on_event({"t": now, "event": "reinstate", "ev": back.ev, "plane": back.plane,
                           "path": back.key[1], "peer": self.peer})

    def probe_bound(self) -> float:
        """How long a probe's reply may take and still count: the timeout of a first
        transmission (a DATA packet that slow would count as lost); hosts/evset.py also
        holds it to the path's current backoff wait, so an unanswered probe has failed
        by the time the next one is due."""
        return self.rto(0)

    # ------------------------------------------------------------------ operator
    # What a fabric controller asks of the connection's EV set (the control API,
    # hosts/mrc_ctl.py). An EV names a path, and the EVs of a path share its fate: these
    # act on the path, with an event for each EV whose state changes.
    def deny_ev(self, ev: int, now: float) -> None:
        """Take the path `ev` names out of use (DENIED) until allow_ev(): its EVs leave
        the rotation, their packets in flight go elsewhere, none is drawn on it."""
        for denied in self.evs.deny(ev):
            self._resend_outstanding(denied)
            self.on_event({"t": now, "event": "deny", "ev": denied.ev, "plane": denied.plane,
                           "path": denied.key[1], "peer": self.peer})

    def allow_ev(self, ev: int, now: float) -> None:
        """The path `ev` names may be used again: its EVs are GOOD and take back their
        share of the plane."""
        for allowed in self.evs.allow(ev):
            self.on_event({"t": now, "event": "allow", "ev": allowed.ev,
                           "plane": allowed.plane, "path": allowed.key[1], "peer": self.peer})

    def modify_ev_state(self, ev: int, state: str, now: float) -> None:
        """OCP MRC's MODIFY_EV_STATE on the path `ev` names: DENIED denies it; GOOD
        allows it if denied, or reinstates it at once if retired; ASSUMED_BAD retires
        it as a loss would (reason `operator`; the `ev_min_active` floor holds)."""
        key = self.evs.path_key(ev)
        if state == DENIED:
            self.deny_ev(ev, now)
        elif state == GOOD:
            if key in self.evs.denied:
                self.allow_ev(ev, now)
            for back in self.evs.reinstate(key, now):
                self.stats["reinstated"] += 1
                self.on_event({"t": now, "event": "reinstate", "ev": back.ev,
                               "plane": back.plane, "path": back.key[1], "reason": "operator",
                               "peer": self.peer})
        elif state == ASSUMED_BAD:
            if key in self.evs.denied:
                raise SenderError(f"EV {ev:#010x}: its path is DENIED; set it GOOD first")
            named = self._usable_on(self.evs.by_ev.get(ev), key)
            if named is not None:
                self._retire_path(named, now, "operator")
        else:
            raise SenderError(f"EV state {state!r}: a controller sets GOOD, ASSUMED_BAD or "
                              "DENIED")

    def replace_ev(self, old: int, new: int, now: float) -> None:
        """OCP MRC's REPLACE_EV: EV `new` takes the place of `old` (EvSet.replace)."""
        gone, made = self.evs.replace(old, new)
        self.on_event({"t": now, "event": "replace", "ev": old, "new_ev": new,
                       "plane": gone.plane, "path": gone.key[1], "new_path": made.key[1],
                       "state": made.state, "peer": self.peer})

    def set_explicit(self, evs: Sequence[int], now: float) -> None:
        """OCP MRC's EXPLICIT mode: the connection sprays over exactly `evs` from now on
        (EvSet.set_explicit)."""
        made = self.evs.set_explicit(evs)
        self.on_event({"t": now, "event": "ev-explicit", "evs": len(made),
                       "denied": sum(e.state == DENIED for e in made), "peer": self.peer})

    # ------------------------------------------------------------------ timers
    def rto(self, retries: int) -> float:
        """The retransmission timeout of a packet sent `retries` times before: the
        connection's srtt + 4 rttvar (rto_initial_s before any RTT sample, RFC 6298),
        at least rto_min_s, doubled per retry past the first `retry_linear_cnt`, at
        most rto_max_s."""
        base = self.srtt + 4 * self.rttvar if self.srtt else self.config.rto_initial_s
        doublings = min(max(0, retries - self.config.retry_linear_cnt), ACK_TIMEOUT_MAX)
        return min(self.config.rto_max_s,
                   max(self.config.rto_min_s, base) * (2 ** doublings))

    def timer_at(self, now: float) -> float:
        """When poll() has timer work next: the loss checks every tick, or sooner a
        plane's reordering timer."""
        return min(max(self.next_check, now), self.recheck_at)

    def _recheck_planes(self, now: float) -> None:
        recheck = self.plane_recheck
        for plane, due in enumerate(recheck):
            if due <= now:
                recheck[plane] = float("inf")
                self._late_on_plane(plane, now)
        self.recheck_at = min(recheck)

    def _late_on_plane(self, plane: int, now: float) -> None:
        """RACK within a plane, run as soon as an ack moves the plane's latest
        acknowledged send time. On each EV of the plane, the oldest packet in flight is
        lost when both hold:

        - a packet sent at least `plane_reorder_min_s` after it on the same plane has
          been acknowledged: the plane, the receiver and its acks are alive (the paths
          of one plane share the host ports at both ends and differ only in the spine);
        - it is older than its path has ever been slow: the path's smoothed RTT plus
          four times its variation (the largest over the path's EVs), so a path merely
          behind a sibling with a shorter queue is left alone.

        A packet that meets the first condition but not yet the second arms the
        plane's reordering timer for the moment it will (poll() runs this again then),
        so its loss is not left waiting for the plane's next ack. A dead spine is thus
        found a round trip or two after its first unanswered packet. A path not
        measured yet (fewer than `rtt_min_samples` RTT samples: the first ones, taken
        while a starting run's queues are still empty, make a bound a few milliseconds
        wide that the queues then outgrow) is left to the checks of _check_losses, like
        a path alone in its plane.
        """
        evs = self.evs.plane_evs[plane]
        bounds: dict[PathKey, float] = {}
        samples, enough = self.path_samples, self.config.rtt_min_samples
        for ev in evs:
            if ev.srtt and samples.get(ev.key, 0) >= enough:
                bound = ev.srtt + 4 * ev.rttvar
                if bound > bounds.get(ev.key, 0.0):
                    bounds[ev.key] = bound
        if not bounds:
            return
        cutoff = self.plane_rack[plane] - self.config.plane_reorder_min_s
        for ev in evs:
            bound = bounds.get(ev.key)
            if bound is None or ev.state not in (GOOD, SKIP):
                continue
            for pkt in ev.outstanding:  # in send order: the first one in flight decides
                if pkt.acked or pkt.ev is not ev:
                    continue
                if pkt.sent_at < cutoff:
                    due = pkt.sent_at + bound  # the very sum the timer is set to
                    if now >= due:
                        self._late(pkt, ev, now, "late-in-plane")
                    elif due < self.plane_recheck[plane]:
                        self.plane_recheck[plane] = due
                        self.recheck_at = min(self.recheck_at, due)
                break

    def _check_losses(self, now: float) -> None:
        """Time-based loss detection across the whole connection (RACK, RFC 8985, over
        all EVs), then the timeout backstop.

        A packet is lost when one sent more than a reordering window after it has been
        acknowledged on any EV. The window is two smoothed RTTs plus four times their
        variation: planes can differ that much (separate queues at every hop), and a
        busy host can stall a whole plane's acks for a few milliseconds. Within a plane
        the much narrower check of _late_on_plane runs on every ack; this one catches a
        path alone in its plane. Until the first RTT sample, only the timeout applies.

        The timeout of a first transmission on a path with no RTT sample of its own is
        the initial one (rto_initial_s, raised by the agent to the fabric's worst round
        trip): the connection's estimate comes from other paths, perhaps of other planes
        with shorter queues, and says nothing of this one's while the queues of a
        starting run are still building. A packet that times out more than
        `retry_linear_cnt` + `retry_exp_cnt` times ends the connection (_give_up).
        """
        window = max(self.config.reorder_min_s, 2 * self.srtt + 4 * self.rttvar)
        cutoff = self.rack_sent_at - window if self.srtt else float("-inf")
        rto, first = self.rto, self.rto(0)
        # Not capped by rto_max_s, the ceiling of the backoff: RFC 6298's initial
        # timeout (1 s) is not bounded by its maximum either.
        unmeasured = max(first, self.config.rto_initial_s)
        samples = self.path_samples
        # Only transmissions in flight can be lost, and they sit on active EVs or on EVs
        # swapped out by a rebalance (draining): an EV leaving the rotation otherwise
        # (retired, denied, plane down) hands its packets back.
        draining = self.evs.draining
        if draining:
            draining[:] = [ev for ev in draining if ev.inflight > 0 and not ev.active]
        suspects = []
        for ev in (*self.evs.rotation, *draining):
            if not ev.outstanding:
                continue
            limit = first if ev.key in samples else unmeasured
            suspects += [p for p in ev.outstanding
                         if p.ev is ev and not p.acked
                         and (p.sent_at < cutoff
                              or now - p.sent_at > (rto(p.retries) if p.retries else limit))]
        for pkt in suspects:
            ev = pkt.ev
            if ev is None:
                continue  # taken back as part of an earlier retirement in this loop
            if pkt.sent_at < cutoff:
                self._late(pkt, ev, now, "late")
                continue
            self.stats["timeouts"] += 1
            self.on_event({"t": now, "event": "timeout", "psn": pkt.psn, "ev": ev.ev,
                           "plane": ev.plane, "peer": self.peer})
            pkt.timeouts += 1
            limit = self.config.retry_linear_cnt + self.config.retry_exp_cnt
            if self.config.retry_exp_cnt < RETRY_EXP_INFINITE and pkt.timeouts > limit:
                self._give_up(pkt, now)
                return
            self._loss(pkt, ev, now, "timeout")

    def _give_up(self, pkt: Packet, now: float) -> None:
        """A packet timed out more often than the retry counts allow: the connection
        moves to the error state, as an MRC queue pair does, and sends nothing more."""
        self.failed = True
        self.stats["qp_errors"] += 1
        self.on_event({"t": now, "event": "qp-error", "psn": pkt.psn,
                       "timeouts": pkt.timeouts, "peer": self.peer})
        self.retx.clear()
        self.unsent.clear()
        self.on_error(now)

    def _probe(self, now: float, out: list[Outgoing]) -> None:
        due = self.evs.due_probes(now, self.config.probe_max_s, self.probe_bound())
        for bad in self.evs.unanswered:
            self.stats["probe_failures"] += 1
            self.on_event({"t": now, "event": "probe-failed", "plane": bad.key[0],
                           "path": bad.key[1], "reason": "unanswered", "peer": self.peer})
        self.evs.unanswered.clear()
        for bad in due:
            ev = bad.evs[0]
            self.stats["probes"] += 1
            self.on_event({"t": now, "event": "probe", "ev": ev.ev, "plane": ev.plane,
                           "path": bad.key[1], "peer": self.peer})
            out.append((ev.plane, ev.ev, self._probe_packet(ev.plane, ev.ev, bad.probes),
                        protocol.CONTROL))
        for plane, local in enumerate(self.local_up):
            if local and not self.remote_up[plane] and now >= self.remote_probe_at[plane]:
                # The peer said this plane is down; its PLANE_STATUS saying it is back may
                # be lost, so ask: the PROBE_REPLY carries its port state.
                wait = self.remote_probe_wait[plane]
                self.remote_probe_at[plane] = now + wait
                self.remote_probe_wait[plane] = min(wait * 2, self.config.probe_max_s)
                ev = self._plane_ev(plane)
                self.stats["probes"] += 1
                self.on_event({"t": now, "event": "probe", "ev": ev, "plane": plane,
                               "reason": "remote-plane", "peer": self.peer})
                out.append((plane, ev, self._probe_packet(plane, ev, 0), protocol.CONTROL))

    def _plane_ev(self, plane: int) -> int:
        """Some EV of the plane to probe it on: an active one, else one of a bad path (a
        plane whose paths all failed still has to be asked whether it is back)."""
        for ev in self.evs.rotation:
            if ev.plane == plane:
                return ev.ev
        for key, bad in self.evs.bad.items():
            if key[0] == plane and bad.evs:
                return bad.evs[0].ev
        return make_ev(plane, 0)

    def _probe_packet(self, plane: int, ev: int, seq: int) -> bytes:
        ctl = wire.Control(0, 0, 0, ev, 0, self.port_state())
        return wire.encode_control(protocol.PROBE, 0, plane, 0, self.conn_id, ev, 0, seq, ctl)

    # ------------------------------------------------------------------ planes
    def port_state(self) -> int:
        return sum(1 << p for p, up in enumerate(self.local_up) if up)

    def set_local_plane(self, plane: int, up: bool, now: float) -> None:
        """This host's NIC port of `plane` lost (or regained) carrier."""
        self.local_up[plane] = up
        self._planes_changed(now)

    def remote_ports(self, state: int, now: float) -> None:
        """The peer's port-state bitmap, from any control packet it sent."""
        state &= (1 << len(self.remote_up)) - 1
        if state == self.remote_state:
            return  # every control packet carries it: the usual case costs one compare
        self.remote_state = state
        remote = [bool(state >> p & 1) for p in range(len(self.remote_up))]
        if remote != self.remote_up:
            for plane, (was, now_up) in enumerate(zip(self.remote_up, remote)):
                if was and not now_up:
                    self.remote_probe_at[plane] = now + self.config.probe_initial_s
                    self.remote_probe_wait[plane] = self.config.probe_initial_s
            self.remote_up = remote
            self._planes_changed(now)

    def _planes_changed(self, now: float) -> None:
        for plane in range(len(self.local_up)):
            up = self.local_up[plane] and self.remote_up[plane]
            if up == self.evs.plane_up[plane]:
                continue
            self.evs.set_plane(plane, up)
            # Say which side's port state decided, so logs tell carrier loss from peers.
            self.on_event({"t": now, "event": "plane-up" if up else "plane-down",
                           "plane": plane, "local_up": self.local_up[plane],
                           "remote_up": self.remote_up[plane], "peer": self.peer})
            if not up:
                # Whatever is in flight on that plane will not arrive: send it elsewhere.
                for ev in (*self.evs.rotation, *self.evs.draining):
                    if ev.plane == plane:
                        self._resend_outstanding(ev)

    # ------------------------------------------------------------------ introspection
    def ev_table(self) -> list[dict]:
        """Every EV the connection has used, with its state (for tools and debugging)."""
        return [{"ev": ev.ev, "plane": ev.plane, "path": ev.key[1], "state": ev.state,
                 "active": ev.active, "inflight": ev.inflight, "srtt": ev.srtt,
                 "last_ack": ev.last_ack, "ecn_marks": ev.ecn_marks, "losses": ev.losses}
                for ev in self.evs.by_ev.values()]

