"""The MRC sender's loss detection: which unacknowledged packets are lost, which are
only late, and the verdict on the path that carried them.

A part of hosts/sender.py's Sender (its base class `LossDetection`). Three checks, from
the narrowest to the widest:

- gaps on an EV: packets passed by `reorder_tolerance` later acknowledged ones of the
  same EV (`_detect_gaps`, run for every ack);
- late within a plane: RACK over the plane's paths, each held to its own srtt + 4
  rttvar (`_late_on_plane`, run when an ack moves the plane's latest acknowledged send
  time);
- late on the connection, then the timeout backstop (`_check_losses`, when the oldest
  transmission in flight may be due).

A loss retires the path (hosts/path_manager.py). A late packet is sent again at once
and its path held while a probe asks whether it still delivers (`_late`, `_confirm`):
a late packet is not a lost one.
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

from hosts import wire
from hosts.config import RETRY_EXP_INFINITE
from hosts.evset import GOOD, SKIP, Ev, PathKey
from hosts.protocol import SUSPECT_PROBE_CLASS, SUSPECT_SEQ, SUSPECT_SEQ_MASK
from hosts.reliability import Packet
from hosts.transport import Outgoing

_sent_at = attrgetter("sent_at")


def in_flight(entry: tuple[float, int, Packet, Ev]) -> bool:
    """Whether an entry of the connection's `flight` is still the packet's latest
    transmission, unanswered and not taken back."""
    _, tx_seq, pkt, ev = entry
    return pkt.tx_seq == tx_seq and pkt.ev is ev and not pkt.acked


class Suspect(NamedTuple):
    """A path held while its probe asks whether a late packet was lost (_late)."""

    deadline: float  # no answer by then retires the path
    seq: int  # the probe's sequence number
    reason: str  # late, late-in-plane or timeout: the retirement's reason
    ev: Ev  # an EV of the path
    late: Packet  # the late packet
    late_sent_at: float  # when it left on the path (a copy went out since)
    held_tx: int  # transmissions of the connection when the path was held (_confirm)
    wait: float  # from the hold to the deadline: a silent connection's next round


class LossDetection:
    """Loss and lateness of one MRC connection's packets (a part of hosts/sender.py's
    Sender; the verdicts go to hosts/path_manager.py's `_retire_path`)."""

    def _init_loss_detection(self, planes: int) -> None:
        # RTT samples per path: a path's own bounds judge its packets only once it has
        # rtt_min_samples of them (_late_on_plane, _check_losses).
        self.path_samples: dict[PathKey, int] = {}
        self.next_check = 0.0
        self.rack_sent_at = 0.0  # send time of the latest-sent packet acknowledged so far
        # The latest transmission an ack answered, in the order they left: whether the
        # connection was heard from since a packet left (_check_losses, _confirm).
        self.rack_tx_seq = 0
        # rack_tx_seq when the last tail-loss probe went (_check_losses): the next one
        # waits for an ack of a later transmission.
        self.tail_probe_after = -1
        self.plane_rack = [0.0] * planes  # the same, per plane
        self.path_rack: dict[PathKey, float] = {}  # the same, per path
        # When a packet passed within its plane becomes late enough to count as lost
        # (the reordering timer of RACK): the plane is checked again then, ack or not.
        self.plane_recheck = [float("inf")] * planes
        self.recheck_at = float("inf")  # the earliest of them
        # Paths held while a probe asks whether a late packet was lost (_late), and
        # those probes, to go out in the next poll.
        self.suspects: dict[PathKey, Suspect] = {}
        # (plane, EV, probe sequence number, the late packet's path_seq)
        self.suspect_probes: list[tuple[int, int, int, int]] = []

    # ------------------------------------------------------------------ acks
    def _judge_acked(self, newly: list[Packet], hdr: wire.Header, ctl: wire.Control,
                     now: float) -> None:
        """Packets one SACK newly acknowledged (hosts/reliability.py `_on_sack`): they
        move the latest acknowledged send times (connection, plane, path), release or
        condemn a held path a later packet of it passed, and pass the packets sent
        before them on their EVs (`_detect_gaps`)."""
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
            # An ack of a first transmission answers it; so does one that names a resend
            # (its PSN, on the EV it went out on). Any other ack of a resent packet may
            # answer its first transmission (a timeout that fired on a packet only
            # queued).
            this_transmission = first or (pkt.psn == hdr.psn and ev.ev == ctl.echo_ev)
            if this_transmission and pkt.tx_seq > self.rack_tx_seq:
                self.rack_tx_seq = pkt.tx_seq
            outstanding = ev.outstanding
            if outstanding and outstanding[0] is pkt:
                # The oldest on its EV: nothing was passed (the usual case of _detect_gaps).
                del outstanding[0]
                continue
            # Gaps are judged by an ack that answers this transmission: any other would
            # pass everything sent on the new EV before the resend, which is still on
            # its way.
            self._detect_gaps(ev, pkt, now, this_transmission)
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
        self._arm_check(now)

    def _arm_check(self, now: float) -> None:
        """After acks: bring `next_check` forward to when the oldest transmission in
        flight may be due now that the acks moved the reordering cutoff and the RTT
        estimate (at once if it is behind the cutoff already)."""
        flight = self._live_flight()
        if not flight:
            return
        sent_at = flight[0][0]
        if sent_at < self._reorder_cutoff():
            self.next_check = now
        else:
            due = max(now + self.config.tick_s, sent_at + self._first_due())
            if due < self.next_check:
                self.next_check = due

    def _arm_sent(self, now: float) -> None:
        """Packets just left: the check is due no later than when they could first be
        late or timed out (the check set earlier may be that of a flight long
        answered)."""
        due = now + self._first_due()
        if due < self.next_check:
            self.next_check = due

    def _first_due(self) -> float:
        """How long after it left a packet may first be judged: a first transmission's
        timeout, or sooner RACK's reordering timer (_overdue)."""
        return min(self.rto(0), self._overdue())

    def _overdue(self) -> float:
        """RACK's reordering timer (RFC 8985): how long a packet may stay unanswered once
        a later transmission has been answered (or, for the tail-loss probe, while
        nothing later has): a round trip plus the reordering window."""
        if not self.srtt:
            return float("inf")
        return self.srtt + self._reorder_window()

    def _live_flight(self):
        """`flight` with its stale front dropped: its first entry, if any, is the
        oldest transmission still in flight."""
        flight = self.flight
        while flight and not in_flight(flight[0]):
            flight.popleft()
        return flight

    def _reorder_cutoff(self) -> float:
        """RACK's line across the connection: a transmission sent before it is late
        (_check_losses). The window is two smoothed RTTs plus four variations, at least
        `reorder_min_s`; before the first RTT sample nothing is late."""
        if not self.srtt:
            return float("-inf")
        return self.rack_sent_at - self._reorder_window()

    def _reorder_window(self) -> float:
        return max(self.config.reorder_min_s, 2 * self.srtt + 4 * self.rttvar)

    # ------------------------------------------------------------------ gaps
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

    def _loss(self, pkt: Packet, ev: Ev, now: float, reason: str) -> None:
        self._take_back(pkt, front=False)
        self.cwnd.on_loss(now)
        ev.losses += 1
        self._retire_path(ev, now, reason, pkt.sent_at)

    # ------------------------------------------------------------------ late packets
    def _late(self, pkt: Packet, ev: Ev, now: float, reason: str) -> None:
        """A packet later than its bounds allow (`late`, `late-in-plane`): sent again
        elsewhere at once, and its path held out of use while a probe asks the receiver
        whether the packet arrived. The probe takes the data queue, never trimmed
        (hosts/protocol.py SUSPECT_PROBE_CLASS), so where the packet is only held up it
        arrives behind it: a reply saying the receiver never saw the packet's `path_seq`
        (ALWAYS_SKIP) retires the path, any other reply clears it, and no reply within
        the path's round trip plus `path_skew_s` retires it (_confirm). A path that
        loses a fifth of its packets, and sends too few for a later one to pass the
        lost one before the check, is so retired a round trip after the check instead
        of clearing on the probe most of its packets survive. A late packet is
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
        self.suspects[key] = Suspect(now + wait, seq, reason, ev, pkt, pkt.sent_at,
                                     self.tx_count, wait)
        self.next_check = min(self.next_check, now + wait)  # _confirm's verdict is due then
        self.evs.hold(key)
        self.suspect_probes.append((ev.plane, ev.ev, seq, pkt.path_seq))
        self.on_event({"t": now, "event": "suspect", "ev": ev.ev, "plane": ev.plane,
                       "path": key[1], "reason": reason, "peer": self.peer})

    def _passed_on_path(self, key: PathKey, sent_at: float, now: float) -> None:
        """A packet sent on a held path at `sent_at` was acknowledged: if the late packet
        that got the path held was sent before it and is still unacknowledged (its
        copy sent elsewhere has not landed either), the path lost it: retired at once.
        Once the copy has landed, which of the two arrived is unknown: the probe
        decides (on_suspect_reply)."""
        suspect = self.suspects[key]
        if suspect.late.acked or suspect.late_sent_at >= sent_at:
            return
        self._unhold(key)
        self._held_path_lost(suspect, now)

    def _confirm(self, now: float, out: list[Outgoing]) -> None:
        """Probe the paths just held (_late), and retire those whose probe found no
        answer in time."""
        for plane, ev, seq, path_seq in self.suspect_probes:
            self.stats["probes"] += 1
            out.append((plane, ev, self._probe_packet(plane, ev, seq, path_seq),
                        SUSPECT_PROBE_CLASS))
        self.suspect_probes.clear()
        for key, suspect in list(self.suspects.items()):
            if now < suspect.deadline:
                continue
            if self.rack_tx_seq <= suspect.held_tx:
                if self.tx_count == suspect.held_tx:
                    # Nothing could be sent since: the held path was the last one in
                    # use, and holding it strands the copy of its late packet. It
                    # takes packets again, unjudged; they judge it.
                    self._unhold(key)
                    continue
                # Nothing sent since the path was held has been acknowledged, on any
                # path: the whole connection is silent, the probe's silence says
                # nothing of this path. The verdict waits another round.
                self.suspects[key] = suspect._replace(deadline=now + suspect.wait)
                self.next_check = min(self.next_check, now + suspect.wait)
                continue
            self._unhold(key)
            if self.evs.plane_up[key[0]]:  # else its plane went down: nothing to judge
                self._held_path_lost(suspect, now)

    def on_suspect_reply(self, ev: Ev, suspect: Suspect, missing: bool, now: float) -> None:
        """The reply to a held path's probe: the path delivers. If the receiver never
        saw the late packet (`missing`, ALWAYS_SKIP), the probe passed where the packet
        should have been: the path lost it. Otherwise the packet was late, not lost."""
        self._unhold(ev.key)
        if missing:
            self._held_path_lost(suspect, now)
            return
        self.stats["late_cleared"] += 1
        self.on_event({"t": now, "event": "suspect-cleared", "ev": ev.ev,
                       "plane": ev.plane, "path": ev.key[1], "peer": self.peer})

    def _held_path_lost(self, suspect: Suspect, now: float) -> None:
        """The verdict on a held path (already released): it lost its late packet."""
        ev = self._usable_on(suspect.ev)
        if ev is not None:
            self.stats["losses"] += 1
            ev.losses += 1
            self._retire_path(ev, now, suspect.reason, suspect.late_sent_at)

    def _unhold(self, key: PathKey) -> None:
        """The path is no longer under suspicion: its EVs take packets again."""
        del self.suspects[key]
        self.evs.release(key)

    # ------------------------------------------------------------------ timers
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

        RACK's reordering timer adds a packet that any later transmission has
        overtaken, once it is older than a round trip plus that window (_overdue),
        however close behind it the later one left: a burst sprayed at once has no
        packet a whole window behind another. The tail-loss probe takes the oldest
        packet with nothing later answered after the same wait, once until an ack
        answers something sent later (`tail_probe_after`). Both are late, not lost
        (_late): sent again elsewhere, their path held and probed.

        The timeout of a first transmission on a path with no RTT sample of its own is
        the initial one (rto_initial_s, raised by the agent to the fabric's worst round
        trip): the connection's estimate comes from other paths, perhaps of other planes
        with shorter queues, and says nothing of this one's while the queues of a
        starting run are still building. A packet that times out more than
        `retry_linear_cnt` + `retry_exp_cnt` times ends the connection (_give_up).

        Every test only ever condemns the oldest transmissions (none waits less than
        _first_due), so the check reads the connection's transmissions in the order
        they left (`flight`) up to the first that no test can reach yet, and sets
        `next_check` to when the oldest of the rest could first be due: it costs what
        is overdue, not every packet in flight, and wakes the loop only when something
        may be (`_arm_check` brings it forward when an ack moves the reordering cutoff,
        `_arm_sent` when packets leave).
        """
        cutoff = self._reorder_cutoff()
        rto, first = self.rto, self.rto(0)
        # Not capped by rto_max_s, the ceiling of the backoff: RFC 6298's initial
        # timeout (1 s) is not bounded by its maximum either.
        unmeasured = max(first, self.config.rto_initial_s)
        overdue = self._overdue()
        tail_probe = self.rack_tx_seq > self.tail_probe_after
        samples = self.path_samples
        # Only transmissions in flight can be lost, and they sit on active EVs or on EVs
        # swapped out by a rebalance (draining): an EV leaving the rotation otherwise
        # (retired, denied, plane down) hands its packets back.
        draining = self.evs.draining
        if draining:
            draining[:] = [ev for ev in draining if ev.inflight > 0 and not ev.active]
        judged = {id(ev) for ev in draining}
        soonest_wait = min(first, overdue)  # _first_due, from the figures at hand
        horizon = max(cutoff, now - soonest_wait)  # sent since: neither late nor timed out
        flight = self._live_flight()
        # Whatever leaves after now is due no sooner than that.
        suspects, late, tail, soonest = [], [], None, now + soonest_wait
        for suspect in self.suspects.values():  # a held path's verdict (_confirm)
            soonest = min(soonest, suspect.deadline)
        for entry in flight:
            sent_at, tx_seq, pkt, ev = entry
            if sent_at >= horizon:
                soonest = min(soonest, sent_at + soonest_wait)
                break
            if not in_flight(entry) or not (ev.active or id(ev) in judged):
                continue
            limit = (rto(pkt.retries) if pkt.retries
                     else first if ev.key in samples else unmeasured)
            if sent_at < cutoff:
                late.append(pkt)
            elif now - sent_at > limit:
                suspects.append(pkt)
            elif now - sent_at > overdue and tx_seq < self.rack_tx_seq:
                late.append(pkt)
            elif now - sent_at > overdue and tail_probe and tail is None:
                tail = pkt
            else:
                soonest = min(soonest, sent_at + min(limit, overdue))
        self.next_check = max(now + self.config.tick_s, soonest)
        for pkt in late:
            if pkt.ev is not None:  # else taken back by an earlier retirement in this loop
                self._late(pkt, pkt.ev, now, "late")
        if tail is not None and tail.ev is not None:
            # One probe per ack, as RFC 8985's: the copy, or the reply to the path's
            # probe, is what lets the check hear of the tail again.
            self.tail_probe_after = self.rack_tx_seq
            self.stats["tail_probes"] += 1
            self._late(tail, tail.ev, now, "tail")
        for pkt in suspects:
            ev = pkt.ev
            if ev is None:
                continue  # taken back as part of an earlier retirement in this loop
            self.stats["timeouts"] += 1
            # Charged to its path only if a packet sent after it has been acknowledged
            # (on any path): the receiver and the way back were alive since it left.
            # Otherwise the whole connection fell silent (a stalled receiver, or every
            # path at once): the packet is resent elsewhere and its path held and
            # probed, its verdict waiting until the connection is heard from again
            # (_silent_timeout).
            silent = self.rack_tx_seq < pkt.tx_seq
            self.on_event({"t": now, "event": "timeout", "psn": pkt.psn, "ev": ev.ev,
                           "plane": ev.plane, "peer": self.peer, "silent": silent})
            pkt.timeouts += 1
            limit = self.config.retry_linear_cnt + self.config.retry_exp_cnt
            if self.config.retry_exp_cnt < RETRY_EXP_INFINITE and pkt.timeouts > limit:
                self._give_up(pkt, now)
                return
            if silent:
                self._silent_timeout(pkt, ev, now)
            else:
                self._loss(pkt, ev, now, "timeout")

    def _silent_timeout(self, pkt: Packet, ev: Ev, now: float) -> None:
        """A timeout while nothing sent after the packet has been acknowledged on any
        path: the connection, not only this path, may be silent. On 2 cores the two
        agents of a pair and the kernel's forwarding starting at once stalled a
        receiver's loop for 20-46 ms, which with the queues outlasted the 70 ms timeout
        floor at 5 Mbit/s: charged to the paths, such a stall retired all but one path
        of a fault-free pair. So the packet is handled as a late one (_late): sent
        again elsewhere, its path held while a probe asks about it. The verdict waits
        while the silence lasts (_confirm), and the retry counts toward the
        connection's budget, so a peer that is gone still ends it (_give_up). Without
        probes the path stays in use: its next packets are passed by later ones if it
        is broken."""
        self.stats["silent_timeouts"] += 1
        if not self.config.probes:
            self._take_back(pkt, front=False)
            self.cwnd.on_loss(now)
            return
        self._late(pkt, ev, now, "timeout")
