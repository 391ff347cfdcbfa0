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
  replies in a row (`probe_successes_lossy` for a path that answered its first probe
  at once or failed one after its first success), each on time and unmarked, at least
  `probe_spacing_s` apart
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

The parts, each a base class of Sender in its own module: hosts/reliability.py (packets,
acks, timeouts), hosts/loss_detection.py (lost or late) and hosts/path_manager.py (the
EV set, retirement, probes, planes, the control API). Sender ties them together and
implements hosts/transport.py's TransportSender, as the RoCE baseline's sender does.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from hosts import protocol, wire
from hosts.config import ConfigError, ProtocolConfig
from hosts.evset import GOOD, SKIP
from hosts.loss_detection import LossDetection
from hosts.path_manager import PathManager
from hosts.reliability import Reliability
from hosts.transport import Charge, Outgoing, PlaneReady, always, uncharged

EventCallback = Callable[[dict], None]
CompletedCallback = Callable[[int, int, float], None]  # (msg_id, bytes, seconds taken)


class Sender(Reliability, LossDetection, PathManager):
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
        self.data_class, self.retransmit_class = classes
        self.config = config
        self.on_event = on_event
        self.on_completed = on_completed
        self.packet_events = config.packet_events
        self.stats = {"data_tx": 0, "retransmits": 0, "acked": 0, "nacks": 0, "ecn_echoes": 0,
                      "losses": 0, "timeouts": 0, "retired": 0, "reinstated": 0, "probes": 0,
                      "messages_completed": 0, "stale_acks": 0, "migrations": 0,
                      "always_skip_rx": 0, "probe_failures": 0, "qp_errors": 0,
                      "late": 0, "late_cleared": 0, "silent_timeouts": 0, "tail_probes": 0}
        if config.pin_path is not None and config.pin_path[0] >= planes:
            raise ConfigError(f"protocol.pin_path: plane {config.pin_path[0]}, but the "
                              f"topology has {planes} planes (0..{planes - 1})")
        # The EV set is drawn from the configured seed and the connection's identity:
        # runs repeat exactly, and different connections (senders do not coordinate)
        # draw different sets. An explicit `seed` (tests) replaces both.
        rng = random.Random(seed or f"ev-set/{config.ev_seed}/{me}/{peer}/{conn_id}")
        self._init_paths(planes, paths_per_plane, rng, shortest)
        self._init_reliability()
        self._init_loss_detection(planes)

    # ------------------------------------------------------------------ state
    @property
    def busy(self) -> bool:
        """Anything left to do: packets unacknowledged, paths to probe, held paths
        waiting for their verdict (_confirm), planes to recheck."""
        return not self.failed and (bool(self.packets) or bool(self.unsent) or bool(self.evs.bad)
                or bool(self.suspects) or not all(self.remote_up))

    def wanted_planes(self) -> list[int]:
        """Planes a packet could go out on now (up, with an EV in the rotation): the
        event loop waits for one of them, never for a plane whose paths are all retired."""
        return self.evs.sendable

    # ------------------------------------------------------------------ sending
    def poll(self, now: float, plane_ready: PlaneReady = always, budget: int = 64,
             charge: Charge = uncharged,
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
            self._check_losses(now)  # sets the next check
            if self.config.probes:
                self._probe(now, out)
                if self.evs.bad or not all(self.remote_up):
                    # Probes of bad paths and of planes the peer said are down: every tick.
                    self.next_check = min(self.next_check, now + self.config.tick_s)
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
        if out:
            self._arm_sent(now)
        return out

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
        if ecn:
            self.stats["ecn_echoes"] += 1
            ev = self.evs.by_ev.get(ctl.echo_ev)
            if ev is not None:
                ev.ecn_marks += 1
                if ev.state == GOOD:
                    ev.state = SKIP
                    self.on_event({"t": now, "event": "skip", "ev": ev.ev, "plane": ev.plane,
                                   "reason": "ecn", "peer": self.peer})
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

    def on_cnp(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """MRC reacts to the ECN echo of each SACK (per EV), not to CNPs: ignored."""

    def set_line_rate(self, line_rate_Bps: float) -> None:
        """MRC's packets are paced per plane by the endpoint (hosts/pacing.py): nothing
        here."""
