"""The MRC sender's path management: the EV set in use, retiring a path on a loss
verdict, probing retired paths and putting them back, ECN migration, whole planes going
down and up, and what a fabric controller asks (OCP MRC's control API).

A part of hosts/sender.py's Sender (its base class `PathManager`). The EV set itself,
its rotation and each path's probe backoff, is hosts/evset.py's EvSet.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hosts import protocol, wire
from hosts.evset import ASSUMED_BAD, DENIED, GOOD, SKIP, Ev, EvSet, PathKey
from hosts.protocol import make_ev
from hosts.reliability import SenderError
from hosts.transport import Outgoing


class PathManager:
    """The paths of one MRC connection (a part of hosts/sender.py's Sender)."""

    def _init_paths(self, planes: int, paths_per_plane: int, rng: random.Random,
                    shortest: Sequence[int] | None) -> None:
        config = self.config
        preferred, fallback = None, ()
        if shortest is not None and len(shortest) < paths_per_plane:
            others = tuple(p for p in range(paths_per_plane) if p not in shortest)
            if config.rack_local_paths == "direct":
                preferred = shortest
            elif config.rack_local_paths == "fallback":
                preferred, fallback = shortest, others
        self.evs = EvSet(planes, paths_per_plane, config.evs_for(planes), rng,
                         pin=config.pin_path, preferred=preferred, fallback=fallback)
        self.ecn_mask = (1 << config.ecn_migrate_acks) - 1
        self.ecn_migrate_marks = config.ecn_migrate_marks
        self.congested: list[Ev] = []  # EVs the migration rule picked during this SACK
        self.local_up = [True] * planes
        self.remote_up = [True] * planes
        self.remote_state = (1 << planes) - 1  # the peer's port-state bitmap, as last seen
        self.remote_probe_at = [0.0] * planes  # next probe of a plane the peer said is down
        self.remote_probe_wait = [config.probe_initial_s] * planes

    # ------------------------------------------------------------------ loss verdicts
    def _retire_path(self, ev: Ev, now: float, reason: str,
                     lost_sent_at: float | None = None) -> None:
        """A real loss verdict on `ev`: retire every EV of its path (unless that would
        break the ev_min_active floor) and send what was in flight on them elsewhere.
        `lost_sent_at`: when the lost packet left, if a packet's loss decided
        (EvSet.retire tells an outage from a lossy path by it)."""
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
                                  self.config.probe_max_s, lost_sent_at):
            self.stats["retired"] += 1
            self.on_event({"t": now, "event": "retire", "ev": retired.ev, "plane": retired.plane,
                           "path": retired.key[1], "reason": reason, "peer": self.peer})
            self._resend_outstanding(retired)
        self._probe_from(now + self.config.probe_initial_s)

    def _probe_from(self, when: float) -> None:
        """A probe is due at `when`: the loss checks' timer (poll()) must run by then."""
        if when < self.next_check:
            self.next_check = when

    def _resend_outstanding(self, ev: Ev) -> None:
        """What is in flight on an EV that leaves use is presumed lost: send it elsewhere."""
        for other in ev.outstanding:
            if not other.acked and other.ev is ev:
                self._take_back(other, front=False)
        ev.outstanding = []

    def _usable_on(self, ev: Ev | None, key: PathKey | None = None) -> Ev | None:
        """`ev` if it is usable, else a usable EV of the rotation on its path (`key`
        when `ev` is None), else None."""
        if ev is not None and self.evs.usable(ev):
            return ev
        key = ev.key if ev is not None else key
        return next((e for e in self.evs.rotation if e.key == key and self.evs.usable(e)),
                    None)

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

    # ------------------------------------------------------------------ probing
    def on_probe_reply(self, hdr: wire.Header, ctl: wire.Control, now: float,
                       ce: bool = False) -> None:
        """A reply to a probe of a retired path: a success if it answers the path's
        pending probe in time (probe_bound()) and neither it (`ce`) nor the probe
        (ECN_ECHO) was CE-marked; `probe_successes` in a row reinstate the path, or
        `probe_successes_lossy` once a probe has failed after its first success
        (hosts/evset.py EvSet.probe_answered)."""
        self.remote_ports(ctl.port_state, now)
        ev = self.evs.by_ev.get(ctl.echo_ev)
        if ev is not None and self.suspects:
            suspect = self.suspects.get(ev.key)
            if suspect is not None and suspect.seq == hdr.psn:
                self.on_suspect_reply(ev, suspect, bool(hdr.flags & protocol.F_ALWAYS_SKIP),
                                      now)
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
                                       config.probe_max_s, config.probe_successes_lossy)
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

    def _probe_packet(self, plane: int, ev: int, seq: int, path_seq: int = 0) -> bytes:
        ctl = wire.Control(0, 0, 0, ev, 0, self.port_state())
        return wire.encode_control(protocol.PROBE, 0, plane, 0, self.conn_id, ev, 0, seq, ctl,
                                   path_seq=path_seq)

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
                    self._probe_from(self.remote_probe_at[plane])
            self.remote_up = remote
            self._planes_changed(now)

    def _planes_changed(self, now: float) -> None:
        for plane in range(len(self.local_up)):
            up = self.local_up[plane] and self.remote_up[plane]
            if up == self.evs.plane_up[plane]:
                continue
            self.evs.set_plane(plane, up, now, self.config.probe_initial_s)
            if up and self.evs.bad:
                self._probe_from(now + self.config.probe_initial_s)
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
    def retired_paths(self) -> int:
        """Paths retired on a loss verdict and not yet reinstated."""
        return len(self.evs.bad)

    def path_states(self, paths: int) -> list[dict]:
        """Every EV the connection holds: its plane, path, state and whether it is in
        the rotation (`active`) or a spare that replaces a retired one."""
        return [{"ev": ev.ev, "plane": ev.plane, "path": ev.key[1], "state": ev.state,
                 "active": ev.active} for ev in self.evs.by_ev.values()]

    def ev_table(self) -> list[dict]:
        """Every EV the connection has used, with its state (for tools and debugging)."""
        return [{"ev": ev.ev, "plane": ev.plane, "path": ev.key[1], "state": ev.state,
                 "active": ev.active, "inflight": ev.inflight, "srtt": ev.srtt,
                 "last_ack": ev.last_ack, "ecn_marks": ev.ecn_marks, "losses": ev.losses}
                for ev in self.evs.by_ev.values()]
