"""The MRC sender's reliability: messages cut into packets, their transmissions, the
acknowledgements a SACK brings, retransmission timeouts and the retry counts.

A part of hosts/sender.py's Sender (its base class `Reliability`): it owns the packets
and messages of the connection, the congestion window, the connection's RTT estimate
and what a SACK acknowledges; each newly acknowledged packet is handed to loss
detection (hosts/loss_detection.py) in the order it was sent.
"""

from __future__ import annotations

from collections import deque

from hosts import protocol, wire
from hosts.cc import make_window
from hosts.config import ACK_TIMEOUT_MAX
from hosts.evset import Ev

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
                 "timeouts", "acked", "passed", "queued", "tx_seq", "path_seq")

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
        self.path_seq = 0  # its latest transmission's path and number on it (the header's)


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


class Reliability:
    """Packets, acks and timeouts of one MRC connection (a part of hosts/sender.py's
    Sender, which supplies `config`, `stats`, `evs` and the event callbacks)."""

    def _init_reliability(self) -> None:
        self.failed = False  # gave up (retry counts): sends nothing more
        self.packets: dict[int, Packet] = {}  # unacknowledged, by PSN
        self.msg_ids: set[int] = set()
        self.next_psn = 0
        self.cum_acked = 0  # every PSN below this one is acknowledged
        self.acked_above = 0  # bit i: PSN cum_acked + i is acknowledged
        self.unsent: deque[Message] = deque()  # messages with packets never sent
        self.retx: deque[Packet] = deque()
        self.inflight = 0
        # Every transmission, in the order it left: (sent_at, tx_seq, packet, EV). An
        # entry whose packet was acknowledged, taken back or sent again since is stale
        # (hosts/loss_detection.py `in_flight`), and dropped when it reaches the front:
        # loss detection reads the oldest first.
        self.flight: deque[tuple[float, int, Packet, Ev]] = deque()
        self.tx_count = 0  # transmissions so far (Packet.tx_seq)
        # DATA packets sent on each path so far: their `path_seq` (the receiver's view of
        # what each path should have brought it).
        self.path_sent: dict = {}
        self.cwnd = make_window(self.config)
        self._ecn_psn = -1  # the PSN whose SACK echoed ECN, until its ack reaches the window
        self.srtt = 0.0
        self.rttvar = 0.0

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

    def has_work(self) -> bool:
        """Something to send that only pacing holds back (not the window)."""
        return (not self.failed and bool(self.retx or self.unsent)
                and self.cwnd.allows(self.inflight))

    @property
    def resending(self) -> bool:
        """Retransmissions are queued (the pacer lets them a little ahead of new data)."""
        return bool(self.retx)

    # ------------------------------------------------------------------ sending
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
        self.flight.append((now, pkt.tx_seq, pkt, ev))
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
        path_seq = pkt.path_seq = ((key[1] & _PATH_SEQ_MASK) << _PATH_SEQ_SHIFT
                                   | (sent & _PATH_SEQ_MASK))
        # wire.encode_data, inlined: the header, then the payload (one copy of it).
        return _pack_header(_VT_DATA, flags, ev.plane, 0, self.conn_id, ev.ev, msg.msg_id,
                            pkt.psn, offset, msg.size, length,
                            path_seq) + msg.data[offset:offset + length]

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

    # ------------------------------------------------------------------ acknowledgements
    def _on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """Acknowledge what the SACK covers, and hand the packets it newly acknowledges
        to loss detection (hosts/loss_detection.py `_judge_acked`)."""
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
        if newly:
            self._judge_acked(newly, hdr, ctl, now)

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
                # smooth_rtt, inlined for the EV and the connection (every ack).
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

    # ------------------------------------------------------------------ timeouts
    def rto(self, retries: int) -> float:
        """The retransmission timeout of a packet sent `retries` times before: the
        connection's srtt + 4 rttvar (rto_initial_s before any RTT sample, RFC 6298),
        at least rto_min_s, doubled per retry past the first `retry_linear_cnt`, at
        most rto_max_s."""
        base = self.srtt + 4 * self.rttvar if self.srtt else self.config.rto_initial_s
        doublings = min(max(0, retries - self.config.retry_linear_cnt), ACK_TIMEOUT_MAX)
        return min(self.config.rto_max_s,
                   max(self.config.rto_min_s, base) * (2 ** doublings))

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
