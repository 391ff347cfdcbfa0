"""The RoCE baseline transport (pure logic): queue pairs, ECMP, go-back-N, QP errors, DCQCN.

It stands for RoCEv2 as the MRC paper ran it (section 5.2.7: a single-plane fabric
with ECMP routing, PFC and DCQCN), the network MRC is compared with. The lossless
class (PFC) is the switches' (docs/protocol.md "The RoCE baseline"); here is the NIC:

- **Queue pairs.** A connection has `qps` queue pairs (hosts/protocol.py BASELINE_QPS:
  `roce` and `single-path` 1, `roce-2` 2, `roce-4` 4, `roce-8` 8, `roce-16` 16). Each
  message is cut into one contiguous slice per QP, the first slice on the QP after
  the one that took the previous message's first slice, as collective libraries spread
  one transfer evenly over their QPs (HCCL_RDMA_QPS_PER_CONNECTION,
  NCCL_IB_QPS_PER_CONNECTION): even a single large message then uses every QP. A QP's
  PSNs carry its number in the top byte (protocol.QP_PSN_SHIFT), so each QP is its own
  in-order sequence.
- **Ports and ECMP.** A QP is bound to one NIC port (an RC QP is): the only one on
  the single-plane twin, or, with `@planes`, port `(src + dst + qp) mod planes`. Its
  UDP source port is a hash of the QP (`qp_flow_port`), and the switches' ECMP hashes
  its 5-tuple among their equal-cost next hops on shortest paths (topologies/paths.py
  `ecmp_path`): same-rack traffic stays at the T0, cross-rack traffic takes the T1 its
  source T0's hash picks, and keeps it. Hashes collide: 8 QPs over 4 T1s often share
  one, which is the baseline's handicap the MRC paper measures. When routing takes a
  next hop away, only the QPs hashed onto it move, to the next hops left (resilient
  hashing), and back when routing offers it again; a QP never changes port.
- **Go-back-N with NAK.** The receiver takes only the next expected PSN of each QP
  (hosts/receiver.py, in_order) and answers the first out-of-sequence packet with a
  NACK (reason GAP) carrying the expected PSN; the QP goes back to it at once. The
  retransmission timeout (doubling per retry) is only the backstop for a lost NACK or
  a lost tail.
- **QP errors.** A QP whose retransmission timer fires `qp_retry_count` times in a row
  without progress (7 by default, the most a verbs QP's retry_cnt takes; -1: never)
  moves to the error state: it sends nothing more, its messages never complete, and
  the endpoint reports it (`on_qp_error`): a training job aborts there, which is what
  a silent T1 does to RoCE and what MRC exists to avoid.
- **DCQCN.** Each QP sends at its own rate, line rate at first. A CNP (the receiver
  sends one for a CE-marked packet, at most one per QP and `cnp_interval_s`) cuts it:
  `target = rate; rate *= 1 - alpha / 2; alpha = (1 - g) alpha + g`, at most once per
  `dcqcn_period_s` or one smoothed round trip, whichever is longer. Each period
  without a cut decays alpha (`alpha *= 1 - g`) and recovers the rate toward the
  target (`rate = (rate + target) / 2`), after `dcqcn_fast_steps` such steps also
  raising the target by `dcqcn_ai` of the line rate (additive increase). Simplified
  from Zhu et al. (SIGCOMM 2015): one timer drives both alpha and the increase (no
  byte counter, no hyper increase), and its period is of the order of the emulated
  fabric's round trip (milliseconds), not DCQCN's 55 us. Its settings are
  ProtocolConfig's `dcqcn_*` (hosts/config.py). Without DCQCN (the `-pfc` transports)
  the receiver sends no CNP and the QPs send at line rate: PFC alone holds them.
- **Routing.** The QPs move only on what the fabric's routing would tell the host
  (`Routes`): a failure next to the switch that forwards the flow (the host's own port,
  its T0's uplink) after `local_failover_s` (hardware ECMP fails over in
  milliseconds); a failure elsewhere (a T1's downlink, the destination's port) after
  `reconvergence_s` (BGP withdraws the route); a silent switch (blackhole) never: its
  control plane stays up, so routing keeps sending traffic into it until it comes
  back. experiments/dataplanes/reroute.py says which paths each host learns about, and when.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable

from hosts import protocol, wire
from hosts.config import ProtocolConfig
from hosts.protocol import QP_PSN_SHIFT
from hosts.reliability import SenderError, smooth_rtt
from topologies.model import Fabric
from topologies.paths import Path, ecmp_path, path_index

# How long routing takes to move traffic: ProtocolConfig.local_failover_s for a failure
# next to the forwarding switch (ECMP failover in hardware), reconvergence_s for a
# remote one (BGP).
ROUTE_KINDS = ("local-down", "local-up", "remote-down", "remote-up")

# RoCEv2 NICs take a QP's UDP source port from the dynamic range (RFC 6335), from a
# hash of the QP: the entropy the fabric's ECMP hashes.
FLOW_PORT_BASE, FLOW_PORT_MASK = 0xC000, 0x3FFF

PathKey = tuple[int, int, int | None]  # (destination host, plane, spine or None)
# The longest a busy connection's timer waits before poll() looks again, whatever its
# queue pairs' timeouts say (a timeout backs off to seconds).
MAX_WAIT_S = 0.05


def route_delay(kind: str, local_failover_s: float, reconvergence_s: float) -> float:
    """How long after a routing event of this kind the host's traffic follows it."""
    if kind not in ROUTE_KINDS:
        raise ValueError(f"unknown route event kind {kind!r}; use one of "
                         f"{', '.join(ROUTE_KINDS)}")
    return local_failover_s if kind.startswith("local") else reconvergence_s


class Routes:
    """One host's routing knowledge: the paths (destination, plane, spine) it knows
    dead. An event takes effect its kind's delay after it happened, as the fabric's
    routing would act on it; whatever routing was never told (a blackhole, random
    loss) stays usable."""

    def __init__(self, local_failover_s: float, reconvergence_s: float):
        self.local_failover_s, self.reconvergence_s = local_failover_s, reconvergence_s
        self.dead: set[PathKey] = set()
        self.planes_down: set[int] = set()  # this host's own ports, from carrier
        self.version = 0  # bumped whenever what is dead changes
        self._pending: list[tuple[float, int, bool, tuple]] = []  # (due, seq, up, what)
        self._seq = 0

    def event(self, kind: str, paths: Iterable[PathKey], now: float,
              delay_s: float | None = None) -> float:
        """Routing learned that `paths` went down or came back; returns when the
        traffic follows: after the kind's delay, or `delay_s` when given (0 for a fault
        in place before the job started: routing had long converged)."""
        if delay_s is not None and not delay_s >= 0:
            raise ValueError(f"a route event's delay must be 0 or more seconds (got {delay_s})")
        due = now + (route_delay(kind, self.local_failover_s, self.reconvergence_s)
                     if delay_s is None else delay_s)
        self._push(due, kind.endswith("-up"), ("paths", tuple(map(tuple, paths))))
        return due

    def local_plane(self, plane: int, up: bool, now: float) -> None:
        """This host's port of `plane` lost or regained carrier: a local event for
        every path of the plane."""
        self._push(now + self.local_failover_s, up, ("plane", plane))

    def _push(self, due: float, up: bool, what: tuple) -> None:
        self._seq += 1
        heapq.heappush(self._pending, (due, self._seq, up, what))

    def next_due(self) -> float | None:
        return self._pending[0][0] if self._pending else None

    def advance(self, now: float) -> None:
        """Apply every event whose delay has passed."""
        pending = self._pending
        while pending and pending[0][0] <= now:
            _, _, up, (what, detail) = heapq.heappop(pending)
            if what == "plane":
                (self.planes_down.discard if up else self.planes_down.add)(detail)
            else:
                keys = {(int(d), int(p), None if s is None else int(s)) for d, p, s in detail}
                if up:
                    self.dead -= keys
                else:
                    self.dead |= keys
            self.version += 1

    def usable(self, key: PathKey) -> bool:
        return key[1] not in self.planes_down and key not in self.dead


class QueuePair:
    """One QP of a connection: its packets, go-back-N state, port, path and DCQCN rate."""

    __slots__ = ("index", "first_psn", "packets", "sent", "base", "next", "resend_until",
                 "sent_at", "retries", "plane", "flow_port", "ev", "spine", "error",
                 "rate", "target", "alpha", "timer", "last_cut", "steps", "send_at")

    def __init__(self, index: int, plane: int, flow_port: int):
        self.index = index
        self.first_psn = index << QP_PSN_SHIFT
        self.packets: list[tuple[int, int, int, int, bool]] = []  # msg, off, len, size, last
        self.sent: list[float] = []  # when each packet was last sent (for RTT samples)
        self.base = 0  # oldest unacknowledged packet (index into packets)
        self.next = 0  # next packet to send
        self.resend_until = 0  # packets below this one are retransmissions
        self.sent_at = 0.0  # when the oldest unacknowledged packet was (re)sent
        self.retries = 0  # timeouts since the last progress
        self.plane = plane  # the NIC port it is bound to
        self.flow_port = flow_port  # its UDP source port, what ECMP hashes
        self.ev = 0  # the path ECMP gives it now (its canonical EV)
        self.spine: int | None = None
        self.error = False  # past its retry limit: sends nothing more
        self.rate = 1.0  # DCQCN current rate, a fraction of the line rate
        self.target = 1.0
        self.alpha = 1.0
        self.timer: float | None = None  # next DCQCN step; None at line rate, idle
        self.last_cut = float("-inf")
        self.steps = 0
        self.send_at = 0.0  # the rate limiter lets the next packet go at this time

    @property
    def busy(self) -> bool:
        return self.base < len(self.packets) and not self.error

    def window_open(self, window: int) -> bool:
        return (self.next < len(self.packets) and self.next - self.base < window
                and not self.error)


def qp_flow_port(src: int, dst: int, qp: int) -> int:
    """The UDP source port of queue pair `qp` from host `src` to host `dst`."""
    digest = hashlib.blake2b(f"{src}->{dst}/{qp}".encode(), digest_size=2).digest()
    return FLOW_PORT_BASE | int.from_bytes(digest, "big") & FLOW_PORT_MASK


def qp_port(src: int, dst: int, qp: int, planes: int) -> int:
    """The NIC port (plane) queue pair `qp` is bound to: its turn among the ports."""
    return (src + dst + qp) % planes


class RoceSender:
    """The sending side of one baseline connection: `qps` queue pairs to one peer.

    Driven by the endpoint through hosts/transport.py's TransportSender, as
    hosts/sender.py's Sender is: send_message(), poll(), on_sack(), on_nack(),
    on_cnp(), timer_at(), has_work(). `line_rate_Bps` (bytes a
    second of the host's link) turns DCQCN's rate into a pace; None leaves the QPs
    unpaced. `routes` is the host's routing knowledge, shared by its connections;
    `on_qp_error(qp, now)` hears of a QP that moved to the error state.
    """

    def __init__(self, me: int, peer: int, conn_id: int, fabric: Fabric,
                 config: ProtocolConfig, on_event, on_completed, qps: int = 1,
                 line_rate_Bps: float | None = None, routes: Routes | None = None,
                 dcqcn: bool = True, on_qp_error=None, paused: set[int] | None = None):
        if not 1 <= qps <= protocol.MAX_QPS:
            raise SenderError(f"qps must be 1..{protocol.MAX_QPS} (got {qps})")
        self.me, self.peer, self.conn_id, self.fabric = me, peer, conn_id, fabric
        self.config, self.on_event, self.on_completed = config, on_event, on_completed
        self.on_qp_error = on_qp_error or (lambda qp, now: None)
        self.routes = routes or Routes(config.local_failover_s, config.reconvergence_s)
        self.line_rate_Bps = line_rate_Bps
        self.dcqcn = dcqcn
        # The host's NIC ports PFC pauses now (shared by its connections): a QP on one
        # sends no data until its port is resumed; its timers run on, as a NIC's do.
        self.paused = paused if paused is not None else set()
        planes = fabric.spec.planes
        self.qps = [QueuePair(q, qp_port(me, peer, q, planes), qp_flow_port(me, peer, q))
                    for q in range(qps)]
        for qp in self.qps:
            path = self._ecmp(qp)
            qp.ev, qp.spine = path.ev, path.spine
        self._route_version = -1
        self.local_up = [True] * planes
        self.messages: dict[int, list] = {}  # msg_id -> [data, packets left, started]
        self.msg_ids: set[int] = set()
        self._first_qp = 0  # the QP of the next message's first slice
        self._rr = 0
        self._now = 0.0
        self._wanted: set[int] = set()  # timer_at()'s answers for the event loop
        self._resend = False
        self.srtt = 0.0
        self.rttvar = 0.0
        self.stats = {"data_tx": 0, "retransmits": 0, "acked": 0, "timeouts": 0, "reroutes": 0,
                      "messages_completed": 0, "nak_rx": 0, "cnp_rx": 0, "rate_cuts": 0,
                      "qp_errors": 0}

    def _ecmp(self, qp: QueuePair, usable=lambda path: True) -> Path | None:
        """The path the fabric's ECMP gives the QP's flow among the `usable` ones."""
        return ecmp_path(self.fabric, self.me, self.peer, qp.plane, qp.flow_port, usable)

    # ------------------------------------------------------------------ queueing
    @property
    def ev(self) -> int:
        """The path of the first QP (the only one of a 1-QP connection)."""
        return self.qps[0].ev

    def send_message(self, msg_id: int, data: bytes, now: float) -> None:
        if msg_id in self.msg_ids:
            raise SenderError(f"message id {msg_id} already used on connection "
                              f"{self.conn_id:#x}")
        mtu = self.config.mtu_payload
        count = max(1, -(-len(data) // mtu))
        n = len(self.qps)
        slices = [(k * count // n, (k + 1) * count // n) for k in range(n)]
        for k, (lo, hi) in enumerate(slices):
            qp = self.qps[(self._first_qp + k) % n]
            if len(qp.packets) + hi - lo > protocol.QP_SEQ_MASK:
                raise SenderError(f"queue pair {qp.index} of connection {self.conn_id:#x} "
                                  f"would pass 2^{QP_PSN_SHIFT} packets")
        self.msg_ids.add(msg_id)
        self.messages[msg_id] = [memoryview(data), count, now]
        for k, (lo, hi) in enumerate(slices):
            qp = self.qps[(self._first_qp + k) % n]
            for i in range(lo, hi):
                offset = i * mtu
                qp.packets.append((msg_id, offset, min(mtu, len(data) - offset), len(data),
                                   i == count - 1))
        self._first_qp = (self._first_qp + 1) % n

    @property
    def busy(self) -> bool:
        return any(qp.busy for qp in self.qps)

    def _sendable(self, qp: QueuePair) -> bool:
        return qp.window_open(self.config.window) and qp.send_at <= self._now

    # The endpoint asks timer_at(), then has_work(), wanted_planes() and resending,
    # whenever the connection was touched (hosts/endpoint.py, timers) and for those
    # with work every turn: one pass over the QPs in timer_at() answers all four.
    def timer_at(self, now: float) -> float:
        """When poll() should look again: when a QP's rate lets its next packet go, a
        QP in flight times out, or routing moves QPs; at most MAX_WAIT_S away, and a
        timeout no sooner than the next tick (poll() checks them in its turn). A QP that
        waits for acknowledgements costs no turn until then: on cluster-c's ring, 64
        hosts' agents woke every tick for each busy connection, and RoCE cost its
        agents twice MRC's CPU per packet."""
        tick = self.config.tick_s
        wake = float("inf")
        window = self.config.window
        wanted, resend = set(), False
        for qp in self.qps:
            if qp.error or qp.base == len(qp.packets):
                continue  # dead, or idle: nothing to time
            if qp.next > qp.base:  # its timeout: poll() fires it once strictly past
                wake = min(wake, max(now + tick, qp.sent_at + self._rto(qp) + 1e-6))
            if qp.window_open(window) and qp.plane not in self.paused:
                if qp.send_at <= now:
                    wanted.add(qp.plane)
                    resend = resend or qp.next == qp.base < qp.resend_until
                elif qp.send_at < wake:
                    wake = qp.send_at
        self._wanted, self._resend = wanted, resend
        due = self.routes.next_due()  # a routing change moves QPs on time, not a tick late
        wake = wake if due is None or not now < due < wake else due
        return min(wake, now + MAX_WAIT_S)

    def has_work(self) -> bool:
        """Something to send that only pacing holds back (not a window nor a QP's
        DCQCN rate), as of the last timer_at()."""
        return bool(self._wanted)

    def wanted_planes(self) -> list[int]:
        """The planes of the QPs that have something to send, as of the last timer_at()."""
        return sorted(self._wanted)

    @property
    def resending(self) -> bool:
        """A QP's next packet restarts a go-back-N round, as of the last timer_at()."""
        return self._resend

    # ------------------------------------------------------------------ sending
    def poll(self, now: float, plane_ready=lambda p: True, budget: int = 64,
             charge=lambda plane, size: None,
             resend_ready=None) -> list[tuple[int, int, bytes, int]]:
        """Packets to send now: (plane, ev, bytes, traffic class ROCE), like Sender.poll;
        the packet that restarts a go-back-N round asks `resend_ready`, if given."""
        self._now = now
        self.routes.advance(now)
        if self._route_version != self.routes.version:
            self._place(now)
        out = []
        n = len(self.qps)
        self._rr = (self._rr + 1) % n
        window = self.config.window
        for i in range(n):
            qp = self.qps[(self._rr + i) % n]
            if qp.base == len(qp.packets) or qp.error:
                continue  # idle (its DCQCN timer catches up when it next sends), or dead
            if qp.next > qp.base and now - qp.sent_at > self._rto(qp):
                self._timeout(qp, now)
            if qp.send_at > now or qp.next - qp.base >= window or qp.plane in self.paused:
                continue
            self._dcqcn_steps(qp, now)
            plane = qp.plane
            while budget > 0 and self._sendable(qp):
                restart = qp.next == qp.base < qp.resend_until
                if not (resend_ready if resend_ready and restart else plane_ready)(plane):
                    break
                out.append(self._packet(qp, plane, now, charge))
                budget -= 1
        return out

    def _packet(self, qp: QueuePair, plane: int, now: float, charge) -> tuple:
        msg_id, offset, length, size, last = qp.packets[qp.next]
        data = self.messages[msg_id][0]
        retransmit = qp.next < qp.resend_until
        flags = (protocol.F_LAST if last else 0) | (protocol.F_RETRANSMIT if retransmit else 0)
        psn = qp.first_psn + qp.next
        packet = wire.encode_data(flags, plane, self.conn_id, qp.ev, msg_id, psn, offset, size,
                                  data[offset:offset + length])
        charge(plane, len(packet))
        if self.config.packet_events:
            self.on_event({"t": now, "event": "send", "psn": psn, "ev": qp.ev, "plane": plane,
                           "retransmit": retransmit, "peer": self.peer})
        if qp.next == qp.base:
            qp.sent_at = now
        if qp.next < len(qp.sent):
            qp.sent[qp.next] = now
        else:
            qp.sent.append(now)
        qp.next += 1
        self.stats["data_tx"] += 1
        self.stats["retransmits"] += retransmit
        if self.line_rate_Bps:
            pace = protocol.frame_bytes(len(packet)) / (qp.rate * self.line_rate_Bps)
            qp.send_at = max(qp.send_at, now) + pace
        return plane, qp.ev, packet, protocol.ROCE

    def _go_back(self, qp: QueuePair, now: float) -> None:
        """Send everything from the oldest unacknowledged packet again, at once."""
        qp.resend_until = max(qp.resend_until, qp.next)
        qp.next = qp.base
        qp.sent_at = now

    def _rto(self, qp: QueuePair) -> float:
        base = max(self.config.rto_min_s, 3 * self.srtt)
        return min(self.config.rto_max_s, base * 2 ** min(qp.retries, 6))

    def _timeout(self, qp: QueuePair, now: float) -> None:
        self.stats["timeouts"] += 1
        self.on_event({"t": now, "event": "timeout", "psn": qp.first_psn + qp.base,
                       "ev": qp.ev, "plane": qp.plane, "peer": self.peer, "qp": qp.index})
        qp.retries += 1
        limit = self.config.qp_retry_count
        if limit >= 0 and qp.retries > limit:
            qp.error = True
            self.stats["qp_errors"] += 1
            self.on_event({"t": now, "event": "qp-error", "psn": qp.first_psn + qp.base,
                           "ev": qp.ev, "plane": qp.plane, "peer": self.peer, "qp": qp.index,
                           "retries": limit})
            self.on_qp_error(qp, now)
            return
        self._go_back(qp, now)

    # ------------------------------------------------------------------ routing
    def _place(self, now: float) -> None:
        """Put each QP on the path ECMP gives its flow among the paths routing offers
        (its own hashed path while routing offers it: resilient hashing); with none, it
        stays where it is and its packets are lost there."""
        self._route_version = self.routes.version
        for qp in self.qps:
            path = self._ecmp(qp, self._usable)
            if path is None or path.ev == qp.ev:
                continue
            old, qp.ev, qp.spine = qp.ev, path.ev, path.spine
            self.stats["reroutes"] += 1
            self.on_event({"t": now, "event": "reroute", "ev": qp.ev, "from_ev": old,
                           "plane": qp.plane, "peer": self.peer, "qp": qp.index})
            if qp.next > qp.base:
                self._go_back(qp, now)  # what was in flight on the old path is presumed lost

    def _usable(self, path: Path) -> bool:
        return self.routes.usable((self.peer, path.plane, path.spine))

    def set_local_plane(self, plane: int, up: bool, now: float) -> None:
        """The host's own port. Its state goes into every answer's port_state at once;
        the QPs move only when routing acts on it (Routes.local_plane, which the
        endpoint calls for the whole host)."""
        self.local_up[plane] = up

    def port_state(self) -> int:
        return sum(1 << p for p, up in enumerate(self.local_up) if up)

    # ------------------------------------------------------------------ answers
    def _qp_of(self, psn: int) -> QueuePair | None:
        index = psn >> QP_PSN_SHIFT
        return self.qps[index] if index < len(self.qps) else None

    def on_packet(self, hdr: wire.Header, ctl: wire.Control | None, now: float) -> None:
        """Feed one decoded control packet of this connection."""
        if ctl is None:
            return
        if hdr.type == protocol.SACK:
            self.on_sack(hdr, ctl, now)
        elif hdr.type == protocol.NACK:
            self.on_nack(hdr, ctl, now)
        elif hdr.type == protocol.CNP:
            self.on_cnp(hdr, ctl, now)

    def on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        qp = self._qp_of(hdr.psn)
        if qp is None:
            return
        self._ack(qp, ctl.cum_psn - qp.first_psn, now)

    def set_line_rate(self, line_rate_Bps: float) -> None:
        """Each queue pair paces to its DCQCN share of this rate from now on."""
        self.line_rate_Bps = line_rate_Bps

    def on_cnp(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """A congestion notification for the QP its PSN names."""
        qp = self._qp_of(hdr.psn)
        if qp is not None:
            self._cnp(qp, now)

    def on_nack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """A GAP NACK names the PSN the receiver expects: everything below it arrived,
        and the QP goes back to it at once."""
        qp = self._qp_of(hdr.psn)
        if qp is None:
            return
        if hdr.reason != protocol.R_GAP:
            # A trimmed packet (never sent by this transport, but a switch decides):
            # send it, and everything after it, again.
            qp.resend_until = max(qp.resend_until, qp.next)
            qp.next = max(qp.base, min(qp.next, hdr.psn - qp.first_psn))
            return
        self.stats["nak_rx"] += 1
        expected = ctl.cum_psn - qp.first_psn
        self._ack(qp, expected, now)
        if qp.base == expected and qp.next > qp.base:
            self.on_event({"t": now, "event": "nak", "psn": ctl.cum_psn, "ev": qp.ev,
                           "peer": self.peer, "qp": qp.index})
            self._go_back(qp, now)

    def _ack(self, qp: QueuePair, cum: int, now: float) -> None:
        """Everything of the QP below `cum` (relative) arrived."""
        if cum <= qp.base or cum > len(qp.packets):
            return
        if cum - 1 >= qp.resend_until and cum - 1 < len(qp.sent):
            # The newest packet acknowledged was sent once only (Karn): a clean sample.
            self.srtt, self.rttvar = smooth_rtt(self.srtt, self.rttvar, now - qp.sent[cum - 1])
        for i in range(qp.base, cum):
            msg_id = qp.packets[i][0]
            entry = self.messages[msg_id]
            entry[1] -= 1
            self.stats["acked"] += 1
            if self.config.packet_events:
                self.on_event({"t": now, "event": "ack", "psn": qp.first_psn + i, "ev": qp.ev,
                               "peer": self.peer})
            if entry[1] == 0:
                self.stats["messages_completed"] += 1
                took = now - entry[2]
                self.on_event({"t": now, "event": "complete", "msg_id": msg_id,
                               "bytes": len(entry[0]), "seconds": took, "peer": self.peer})
                self.on_completed(msg_id, len(entry[0]), took)
                del self.messages[msg_id]
        qp.base = cum
        qp.next = max(qp.next, cum)
        qp.sent_at, qp.retries = now, 0

    def on_probe_reply(self, hdr: wire.Header, ctl: wire.Control, now: float,
                       ce: bool = False) -> None:
        """The baseline sends no probes: nothing to hear."""

    def remote_ports(self, state: int, now: float) -> None:
        """The baseline learns of the peer's ports from the fabric's routing
        (`routes`), not from the peer: ignored."""

    def retired_paths(self) -> int:
        """A queue pair keeps the path ECMP gives it; it retires none."""
        return 0

    def path_states(self, paths: int) -> list[dict]:
        """One EV per queue pair, its current path (`paths` per plane to the peer)."""
        return [{"ev": qp.ev, "plane": qp.plane, "path": path_index(qp.ev, paths),
                 "state": "ERROR" if qp.error else "IN_USE", "active": True,
                 "qp": qp.index} for qp in self.qps]

    # ------------------------------------------------------------------ DCQCN
    def _cnp(self, qp: QueuePair, now: float) -> None:
        """Congestion notification: cut the QP's rate (at most once per period); without
        DCQCN it is only counted."""
        self.stats["cnp_rx"] += 1
        if not self.dcqcn:
            return
        self._dcqcn_steps(qp, now)
        period = self._dcqcn_period()
        if now - qp.last_cut < period:
            return
        g = self.config.dcqcn_g
        qp.target = qp.rate
        qp.rate = max(self.config.dcqcn_min_rate, qp.rate * (1 - qp.alpha / 2))
        qp.alpha = (1 - g) * qp.alpha + g
        qp.steps, qp.last_cut, qp.timer = 0, now, now + period
        self.stats["rate_cuts"] += 1
        self.on_event({"t": now, "event": "rate-cut", "rate": round(qp.rate, 4),
                       "alpha": round(qp.alpha, 4), "peer": self.peer, "qp": qp.index})

    def _dcqcn_period(self) -> float:
        """DCQCN's timer period: dcqcn_period_s, but never under one smoothed round
        trip. DCQCN's 55 us period is several round trips of the fabric it was made for;
        on a slow emulated link (a 2.5 Mbit/s frame takes 4 ms, a round trip tens) a
        fixed 4 ms period cut a QP several times for the marks of one window, until
        one flow of eight crawled for over half a minute."""
        return max(self.config.dcqcn_period_s, self.srtt)

    def _dcqcn_steps(self, qp: QueuePair, now: float) -> None:
        """Every period without a cut: alpha decays, the rate recovers toward the
        target, and after the fast-recovery steps the target rises."""
        config = self.config
        while qp.timer is not None and qp.timer <= now:
            qp.alpha *= 1 - config.dcqcn_g
            qp.steps += 1
            if qp.steps > config.dcqcn_fast_steps:
                qp.target = min(1.0, qp.target + config.dcqcn_ai)
            qp.rate = min(1.0, (qp.rate + qp.target) / 2)
            # Back at line rate: nothing left to recover, the timer sleeps (alpha keeps
            # the value it has, as it would after a long quiet spell at full rate).
            qp.timer = None if qp.rate >= 1.0 - 1e-6 else qp.timer + self._dcqcn_period()
            if qp.timer is None:
                qp.rate = qp.target = 1.0
