"""The MRC sender of one connection (pure logic, injectable clock, no sockets).

Messages are cut into packets with fixed PSNs; each transmission sprays onto the next
EV of the rotation (hosts/evset.py). The receiver acknowledges every packet with a SACK
echoing its EV, so the sender learns per EV what arrived:

- packets passed on the same EV by `reorder_tolerance` later acknowledged ones, or a
  retransmission timeout without a NACK: a real loss -> the EV's path is retired
  (ASSUMED_BAD) and the packet goes out again on another EV;
- a NACK (the packet was trimmed): retransmit at once on another EV, SKIP the EV once;
- an ECN echo: SKIP the EV once;
- retired paths are probed with backoff; a PROBE_REPLY reinstates them;
- the peer's port-state bitmap and the local carrier take whole planes out and back.

`poll()` returns the packets to send now; the endpoint puts them on the wire.
"""

from __future__ import annotations

import random
from collections import deque

from hosts import wire
from hosts.cc import DelayWindow
from hosts.config import ProtocolConfig
from hosts.evset import ASSUMED_BAD, GOOD, SKIP, Ev, EvSet


class Packet:
    __slots__ = ("psn", "msg", "offset", "length", "last", "ev", "sent_at", "retries",
                 "acked", "passed", "queued")

    def __init__(self, psn: int, msg: Message, offset: int, length: int, last: bool):
        self.psn, self.msg, self.offset, self.length, self.last = psn, msg, offset, length, last
        self.ev: Ev | None = None  # the EV of the transmission in flight, if any
        self.sent_at = 0.0
        self.retries = 0
        self.acked = False
        self.passed = 0
        self.queued = False


class Message:
    __slots__ = ("msg_id", "data", "size", "remaining", "started")

    def __init__(self, msg_id: int, data: bytes, started: float, packets: int):
        self.msg_id, self.data, self.size = msg_id, memoryview(data), len(data)
        self.remaining, self.started = packets, started


class Sender:
    def __init__(self, me: int, peer: int, conn_id: int, planes: int, paths_per_plane: int,
                 config: ProtocolConfig, on_event, on_completed, seed: int = 0):
        self.me, self.peer, self.conn_id = me, peer, conn_id
        self.config = config
        self.on_event = on_event
        self.on_completed = on_completed
        self.evs = EvSet(planes, paths_per_plane, config.evs_per_plane,
                         random.Random(seed or conn_id))
        self.local_up = [True] * planes
        self.remote_up = [True] * planes
        self.packets: dict[int, Packet] = {}  # unacknowledged, by PSN
        self.next_psn = 0
        self.cum_acked = 0  # every PSN below this one is acknowledged
        self.unsent: deque[Packet] = deque()
        self.retx: deque[Packet] = deque()
        self.inflight = 0
        self.cwnd = DelayWindow(config.cwnd_initial, config.window, config.target_delay_s,
                                config.cc)
        self.srtt = 0.0
        self.rttvar = 0.0
        self.next_check = 0.0
        self.rack_sent_at = 0.0  # send time of the latest-sent packet acknowledged so far
        self.stats = {"data_tx": 0, "retransmits": 0, "acked": 0, "nacks": 0, "ecn_echoes": 0,
                      "losses": 0, "timeouts": 0, "retired": 0, "reinstated": 0, "probes": 0,
                      "messages_completed": 0}

    # ------------------------------------------------------------------ messages
    def send_message(self, msg_id: int, data: bytes, now: float) -> None:
        mtu = self.config.mtu_payload
        count = max(1, -(-len(data) // mtu))
        msg = Message(msg_id, data, now, count)
        for i in range(count):
            offset = i * mtu
            pkt = Packet(self.next_psn, msg, offset, min(mtu, len(data) - offset),
                         i == count - 1)
            pkt.queued = True
            self.packets[pkt.psn] = pkt
            self.unsent.append(pkt)
            self.next_psn += 1

    @property
    def busy(self) -> bool:
        return bool(self.packets) or bool(self.evs.bad)

    def has_work(self) -> bool:
        """Something to send that only pacing holds back (not the window)."""
        return bool(self.retx or self.unsent) and self.cwnd.allows(self.inflight)

    def wanted_planes(self) -> list[int]:
        return [p for p, up in enumerate(self.evs.plane_up) if up]

    # ------------------------------------------------------------------ sending
    def poll(self, now: float, plane_ready, budget: int = 64) -> list[tuple[int, int, bytes, bool]]:
        """Packets to send now: (plane, ev, bytes, ECN-capable)."""
        out: list[tuple[int, int, bytes, bool]] = []
        if now >= self.next_check:
            self.next_check = now + self.config.tick_s
            self._check_losses(now)
            if self.config.probes:
                self._probe(now, out)
        while budget > 0 and self.cwnd.allows(self.inflight) and (self.retx or self.unsent):
            queue = self.retx if self.retx else self.unsent
            pkt = queue[0]
            if pkt.acked:
                queue.popleft()
                pkt.queued = False
                continue
            ev = self.evs.pick(plane_ready)
            if ev is None:
                break
            queue.popleft()
            pkt.queued = False
            out.append((ev.plane, ev.ev, self._transmit(pkt, ev, now), True))
            budget -= 1
        return out

    def _transmit(self, pkt: Packet, ev: Ev, now: float) -> bytes:
        flags = (wire.F_LAST if pkt.last else 0) | (wire.F_RETRANSMIT if pkt.retries else 0)
        pkt.ev, pkt.sent_at, pkt.passed = ev, now, 0
        ev.last_sent = now
        ev.inflight += 1
        ev.outstanding.append(pkt)
        self.inflight += 1
        self.stats["data_tx"] += 1
        if pkt.retries:
            self.stats["retransmits"] += 1
        msg = pkt.msg
        return wire.encode_data(flags, ev.plane, self.conn_id, ev.ev, msg.msg_id, pkt.psn,
                                pkt.offset, msg.size,
                                msg.data[pkt.offset:pkt.offset + pkt.length])

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
    def on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        self.remote_ports(ctl.port_state, now)
        if hdr.flags & wire.F_ECN_ECHO:
            self.stats["ecn_echoes"] += 1
            self.cwnd.on_congestion(now)
            ev = self.evs.by_ev.get(ctl.echo_ev)
            if ev is not None and ev.state == GOOD:
                ev.state = SKIP
                ev.ecn_marks += 1
                self.on_event({"t": now, "event": "skip", "ev": ev.ev, "plane": ev.plane,
                               "reason": "ecn", "peer": self.peer})
        newly: list[Packet] = []
        cum = ctl.cum_psn
        if cum > self.cum_acked:
            ack = self._ack
            for psn in range(self.cum_acked, cum):
                ack(psn, now, newly)
            self.cum_acked = cum
        if hdr.psn >= cum:
            self._ack(hdr.psn, now, newly)
        bits, base = ctl.bitmap, ctl.sack_base
        while bits:
            low = bits & -bits
            self._ack(base + low.bit_length() - 1, now, newly)
            bits ^= low
        # One SACK may answer many packets; judge gaps in the order they were sent (PSN
        # order differs once retransmissions are in flight).
        if len(newly) > 1:
            newly.sort(key=lambda p: p.sent_at)
        for pkt in newly:
            self._detect_gaps(pkt.ev, pkt, now)

    def _ack(self, psn: int, now: float, newly: list[Packet]) -> None:
        pkt = self.packets.pop(psn, None)
        if pkt is None:
            return
        pkt.acked = True
        self.stats["acked"] += 1
        ev = pkt.ev
        if ev is not None:
            ev.inflight -= 1
            self.inflight -= 1
            ev.last_ack = now
            if pkt.retries == 0:
                # Only first transmissions: an ack of a retransmitted packet may answer
                # the original, and would make everything sent since look lost.
                self.rack_sent_at = max(self.rack_sent_at, pkt.sent_at)
                self._rtt(ev, now - pkt.sent_at)
                self.cwnd.on_rtt(now - pkt.sent_at, now)
            newly.append(pkt)
        msg = pkt.msg
        msg.remaining -= 1
        if msg.remaining == 0:
            self.stats["messages_completed"] += 1
            self.on_completed(msg.msg_id, msg.size, now - msg.started)
            msg.data = memoryview(b"")

    def _rtt(self, ev: Ev, sample: float) -> None:
        ev.srtt = sample if not ev.srtt else 0.875 * ev.srtt + 0.125 * sample
        if not self.srtt:
            self.srtt, self.rttvar = sample, sample / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - sample)
            self.srtt = 0.875 * self.srtt + 0.125 * sample

    def _detect_gaps(self, ev: Ev, acked: Packet, now: float) -> None:
        """Packets sent on `ev` before `acked` and still unacknowledged were passed."""
        lost = []
        keep = []
        seen = False
        for pkt in ev.outstanding:
            if pkt is acked:
                seen = True  # everything after it was sent later: not passed
                continue
            if pkt.acked or pkt.ev is not ev:
                continue  # done, or since sent elsewhere
            if not seen:
                pkt.passed += 1
                if pkt.passed >= self.config.reorder_tolerance:
                    lost.append(pkt)
                    continue
            keep.append(pkt)
        ev.outstanding = keep
        for pkt in lost:
            self.stats["losses"] += 1
            self._loss(pkt, ev, now, "gap")

    def _loss(self, pkt: Packet, ev: Ev, now: float, reason: str) -> None:
        self._take_back(pkt, front=False)
        ev.losses += 1
        if ev.state not in (GOOD, SKIP):
            return
        same_path = sum(1 for e in self.evs.rotation if e.key == ev.key and self.evs.usable(e))
        if self.evs.active_usable() - same_path < self.config.ev_min_active:
            self.on_event({"t": now, "event": "retire-suppressed", "ev": ev.ev,
                           "plane": ev.plane, "reason": reason, "peer": self.peer})
            return
        for retired in self.evs.retire(ev, now, self.config.probe_initial_s):
            self.stats["retired"] += 1
            self.on_event({"t": now, "event": "retire", "ev": retired.ev, "plane": retired.plane,
                           "path": retired.key[1], "reason": reason, "peer": self.peer})
            # What was in flight on a dead path is presumed lost: send it elsewhere now.
            for other in retired.outstanding:
                if not other.acked and other.ev is retired:
                    self._take_back(other, front=False)
            retired.outstanding = []

    def on_nack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        self.remote_ports(ctl.port_state, now)
        self.stats["nacks"] += 1
        self.cwnd.on_congestion(now)
        pkt = self.packets.get(hdr.psn)
        ev = self.evs.by_ev.get(ctl.echo_ev)
        self.on_event({"t": now, "event": "nack", "psn": hdr.psn, "ev": ctl.echo_ev,
                       "reason": hdr.reason, "peer": self.peer})
        if pkt is not None and pkt.ev is not None and pkt.ev.ev == ctl.echo_ev:
            self._take_back(pkt, front=True)  # at once, and on another EV by rotation
        if ev is not None and ev.state == GOOD and hdr.reason == wire.R_TRIMMED:
            ev.state = SKIP
            self.on_event({"t": now, "event": "skip", "ev": ev.ev, "plane": ev.plane,
                           "reason": "trimmed", "peer": self.peer})

    def on_probe_reply(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        self.remote_ports(ctl.port_state, now)
        ev = self.evs.by_ev.get(ctl.echo_ev)
        if ev is None or ev.state != ASSUMED_BAD:
            return
        for back in self.evs.reinstate(ev.key):
            self.stats["reinstated"] += 1
            self.on_event({"t": now, "event": "reinstate", "ev": back.ev, "plane": back.plane,
                           "path": back.key[1], "peer": self.peer})

    # ------------------------------------------------------------------ timers
    def rto(self, retries: int) -> float:
        # Before the first RTT sample nothing is known: start conservatively (RFC 6298).
        base = self.srtt + 4 * self.rttvar if self.srtt else self.config.rto_initial_s
        return min(self.config.rto_max_s,
                   max(self.config.rto_min_s, base) * (2 ** min(retries, 6)))

    def _check_losses(self, now: float) -> None:
        """Time-based loss detection over the whole connection, then the timeout backstop.

        A packet is lost when one sent more than a reordering window after it has been
        acknowledged on any EV (RACK, RFC 8985, across paths): a dead path is found about
        one round trip after its first unanswered packet, not after a timeout. The window
        is two smoothed RTTs plus four times their variation: queues on different planes
        can differ that much, and a busy host can stall a whole plane's acks for a few
        milliseconds. Until the first RTT sample, only the timeout applies.
        """
        window = max(self.config.reorder_min_s, 2 * self.srtt + 4 * self.rttvar)
        cutoff = self.rack_sent_at - window if self.srtt else float("-inf")
        # Only transmissions in flight can be lost; they sit on their EV's list.
        suspects = [p for ev in self.evs.by_ev.values() for p in ev.outstanding
                    if p.ev is ev and not p.acked
                    and (p.sent_at < cutoff or now - p.sent_at > self.rto(p.retries))]
        for pkt in suspects:
            ev = pkt.ev
            if ev is None:
                continue  # taken back as part of an earlier retirement in this loop
            if pkt.sent_at < cutoff:
                self.stats["losses"] += 1
                self._loss(pkt, ev, now, "late")
                continue
            self.stats["timeouts"] += 1
            self.on_event({"t": now, "event": "timeout", "psn": pkt.psn, "ev": ev.ev,
                           "plane": ev.plane, "peer": self.peer})
            self._loss(pkt, ev, now, "timeout")

    def _probe(self, now: float, out: list) -> None:
        for bad in self.evs.due_probes(now, self.config.probe_max_s):
            ev = bad.evs[0]
            self.stats["probes"] += 1
            self.on_event({"t": now, "event": "probe", "ev": ev.ev, "plane": ev.plane,
                           "path": bad.key[1], "peer": self.peer})
            ctl = wire.Control(0, 0, 0, ev.ev, 0, self.port_state())
            out.append((ev.plane, ev.ev, wire.encode_control(
                wire.PROBE, 0, ev.plane, 0, self.conn_id, ev.ev, 0, bad.probes, ctl), False))

    # ------------------------------------------------------------------ planes
    def port_state(self) -> int:
        return sum(1 << p for p, up in enumerate(self.local_up) if up)

    def set_local_plane(self, plane: int, up: bool, now: float) -> None:
        self.local_up[plane] = up
        self._planes_changed(now)

    def remote_ports(self, state: int, now: float) -> None:
        remote = [bool(state >> p & 1) for p in range(len(self.remote_up))]
        if remote != self.remote_up:
            self.remote_up = remote
            self._planes_changed(now)

    def _planes_changed(self, now: float) -> None:
        for plane in range(len(self.local_up)):
            up = self.local_up[plane] and self.remote_up[plane]
            if up == self.evs.plane_up[plane]:
                continue
            self.evs.set_plane(plane, up)
            self.on_event({"t": now, "event": "plane-up" if up else "plane-down",
                           "plane": plane, "peer": self.peer})
            if not up:
                # Whatever is in flight on that plane will not arrive: send it elsewhere.
                for ev in self.evs.rotation:
                    if ev.plane == plane:
                        for pkt in ev.outstanding:
                            if not pkt.acked and pkt.ev is ev:
                                self._take_back(pkt, front=False)
                        ev.outstanding = []
