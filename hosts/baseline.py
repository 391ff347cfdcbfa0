"""The single-path baseline transport (pure logic): one path per flow, go-back-N.

Like RoCE on an ECMP fabric: a connection is hashed onto one path (EV) and keeps it.
Packets go out in order within a window; the receiver takes only the next expected PSN
(hosts/receiver.py, in_order=True). When the oldest packet times out, everything from it
on is sent again (go-back-N), with exponential backoff. The path changes only when an
emulated routing reconvergence moves the flow: `reconvergence_s` (default 1 s, as BGP
would take) after the first timeout of a failure that has not healed since, the flow
takes the next path of the catalogue and goes back N on it at once. Whether that path
works is the network's business; if it does not, the next reconvergence moves it again.
"""

from __future__ import annotations

import hashlib

from hosts import protocol, wire
from hosts.cc import DelayWindow
from hosts.config import ProtocolConfig
from hosts.protocol import ev_plane, make_ev
from hosts.sender import SenderError, smooth_rtt


class SinglePathSender:
    def __init__(self, me: int, peer: int, conn_id: int, planes: int, paths_per_plane: int,
                 config: ProtocolConfig, on_event, on_completed):
        self.me, self.peer, self.conn_id = me, peer, conn_id
        self.config, self.on_event, self.on_completed = config, on_event, on_completed
        self.paths = [make_ev(p, c) for p in range(planes) for c in range(paths_per_plane)]
        digest = hashlib.blake2b(f"{me}->{peer}".encode(), digest_size=4).digest()
        self.path_index = int.from_bytes(digest, "big") % len(self.paths)
        self.local_up = [True] * planes
        self.packets: list[tuple[int, int, int, int, bool]] = []  # psn -> msg, off, len, last
        self.messages: dict[int, list] = {}  # msg_id -> [data, remaining, started]
        self.msg_ids: set[int] = set()
        self.base = 0  # oldest unacknowledged PSN
        self.next = 0  # next PSN to send
        self.sent_at = 0.0
        self.retries = 0
        self.failing_since: float | None = None
        self.srtt = 0.0
        self.rttvar = 0.0
        self.cwnd = DelayWindow(config.cwnd_initial, config.window, config.target_delay_s,
                                config.cc)
        self.stats = {"data_tx": 0, "retransmits": 0, "acked": 0, "timeouts": 0, "reroutes": 0,
                      "messages_completed": 0}

    @property
    def ev(self) -> int:
        return self.paths[self.path_index]

    def send_message(self, msg_id: int, data: bytes, now: float) -> None:
        if msg_id in self.msg_ids:
            raise SenderError(f"message id {msg_id} already used on connection "
                              f"{self.conn_id:#x}")
        self.msg_ids.add(msg_id)
        mtu = self.config.mtu_payload
        count = max(1, -(-len(data) // mtu))
        self.messages[msg_id] = [memoryview(data), count, now]
        for i in range(count):
            offset = i * mtu
            self.packets.append((msg_id, offset, min(mtu, len(data) - offset), len(data),
                                 i == count - 1))

    @property
    def busy(self) -> bool:
        return self.base < len(self.packets)

    def has_work(self) -> bool:
        """Something to send that only pacing holds back (not the window)."""
        return self.next < len(self.packets) and self.cwnd.allows(self.next - self.base)

    def wanted_planes(self) -> list[int]:
        return [ev_plane(self.ev)]

    def timer_at(self, now: float) -> float:
        """When poll() should look at the timeout again: every tick."""
        return now + self.config.tick_s

    @property
    def resending(self) -> bool:
        """The next packet restarts a go-back-N round."""
        return self.retries > 0 and self.next == self.base

    def poll(self, now: float, plane_ready=lambda p: True, budget: int = 64,
             charge=lambda plane, size: None,
             resend_ready=None) -> list[tuple[int, int, bytes, bool]]:
        """Packets to send now: (plane, ev, bytes, is DATA), like Sender.poll; the
        packet that restarts a go-back-N round asks `resend_ready`, if given."""
        out = []
        if self.failing_since is not None and now - self.failing_since >= \
                self.config.reconvergence_s:
            self._reroute(now)
        elif self.busy and self.next > self.base and now - self.sent_at > self._rto():
            self._timeout(now)
        plane = ev_plane(self.ev)
        while (budget > 0 and self.next < len(self.packets)
               and self.cwnd.allows(self.next - self.base)
               and (resend_ready if resend_ready and self.resending else plane_ready)(plane)):
            msg_id, offset, length, size, last = self.packets[self.next]
            data = self.messages[msg_id][0]
            flags = ((protocol.F_LAST if last else 0)
                     | (protocol.F_RETRANSMIT if self.retries else 0))
            packet = wire.encode_data(flags, plane, self.conn_id, self.ev, msg_id, self.next,
                                      offset, size, data[offset:offset + length])
            charge(plane, len(packet))
            out.append((plane, self.ev, packet, True))
            if self.config.packet_events:
                self.on_event({"t": now, "event": "send", "psn": self.next, "ev": self.ev,
                               "plane": plane, "retransmit": bool(self.retries),
                               "peer": self.peer})
            if self.next == self.base:
                self.sent_at = now
            self.next += 1
            budget -= 1
            self.stats["data_tx"] += 1
        return out

    def _rto(self) -> float:
        base = max(self.config.rto_min_s, 3 * self.srtt)
        return min(self.config.rto_max_s, base * 2 ** min(self.retries, 6))

    def _timeout(self, now: float) -> None:
        self.stats["timeouts"] += 1
        self.stats["retransmits"] += self.next - self.base
        self.on_event({"t": now, "event": "timeout", "psn": self.base, "ev": self.ev,
                       "plane": ev_plane(self.ev), "peer": self.peer})
        if self.failing_since is None:
            self.failing_since = now  # routing starts to reconverge around the failure
        self.retries += 1
        self.next = self.base  # go back N
        self.sent_at = now

    def _reroute(self, now: float) -> None:
        """Routing has reconverged: the flow moves to the next path and goes back N."""
        old = self.ev
        self.path_index = (self.path_index + 1) % len(self.paths)
        self.failing_since = None
        self.stats["reroutes"] += 1
        self.on_event({"t": now, "event": "reroute", "ev": self.ev, "from_ev": old,
                       "plane": ev_plane(self.ev), "peer": self.peer})
        self.stats["retransmits"] += self.next - self.base
        self.retries = 0
        self.next = self.base
        self.sent_at = now

    def on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        if ctl.cum_psn <= self.base:
            return
        if self.retries == 0:
            sample = now - self.sent_at
            self.srtt, self.rttvar = smooth_rtt(self.srtt, self.rttvar, sample)
            self.cwnd.on_rtt(sample, now)
        for psn in range(self.base, min(ctl.cum_psn, len(self.packets))):
            msg_id = self.packets[psn][0]
            entry = self.messages[msg_id]
            entry[1] -= 1
            self.stats["acked"] += 1
            if self.config.packet_events:
                self.on_event({"t": now, "event": "ack", "psn": psn, "ev": self.ev,
                               "peer": self.peer})
            if entry[1] == 0:
                self.stats["messages_completed"] += 1
                took = now - entry[2]
                self.on_event({"t": now, "event": "complete", "msg_id": msg_id,
                               "bytes": len(entry[0]), "seconds": took, "peer": self.peer})
                self.on_completed(msg_id, len(entry[0]), took)
                del self.messages[msg_id]
        self.base = min(ctl.cum_psn, len(self.packets))
        self.next = max(self.next, self.base)
        self.sent_at, self.retries, self.failing_since = now, 0, None

    def on_packet(self, hdr: wire.Header, ctl: wire.Control | None, now: float) -> None:
        """Feed one decoded control packet of this connection."""
        if ctl is None:
            return
        if hdr.type == protocol.SACK:
            self.on_sack(hdr, ctl, now)
        elif hdr.type == protocol.NACK:
            self.on_nack(hdr, ctl, now)

    def on_nack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        self.next = max(self.base, min(self.next, hdr.psn))  # go back to the trimmed packet

    def on_probe_reply(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        pass

    def set_local_plane(self, plane: int, up: bool, now: float) -> None:
        self.local_up[plane] = up  # nothing moves until routing reconverges

    def port_state(self) -> int:
        return sum(1 << p for p, up in enumerate(self.local_up) if up)
