"""The EV set of one connection: which entropy values (paths) it sprays over, and their state.

Each plane holds `evs_per_plane` active EVs, in a rotation that interleaves the planes
so consecutive packets go to different planes. An EV is GOOD, SKIP (passed over for one
rotation after an ECN echo or a trimmed NACK), ASSUMED_BAD (retired after a real loss,
probed until it answers) or DENIED (set by an operator, never used).

EVs map to physical paths by the documented rule (topologies/paths.py): plane in the
top byte, choice modulo the plane's path count below. EVs that share a path share its
fate, so a loss retires all active EVs of that path at once, a retired EV is replaced by
one of the same plane on a path not known bad, and one probe per bad path suffices.
"""

from __future__ import annotations

import random

from topologies.paths import EV_PLANE_SHIFT

GOOD, SKIP, ASSUMED_BAD, DENIED = "GOOD", "SKIP", "ASSUMED_BAD", "DENIED"


class Ev:
    __slots__ = ("ev", "plane", "key", "state", "inflight", "outstanding", "srtt",
                 "last_ack", "last_sent", "ecn_marks", "losses", "active")

    def __init__(self, ev: int, plane: int, key: tuple[int, int]):
        self.ev, self.plane, self.key = ev, plane, key
        self.state = GOOD
        self.inflight = 0
        self.outstanding: list = []  # packets sent on this EV, in send order (lazy cleanup)
        self.srtt = 0.0
        self.last_ack = 0.0
        self.last_sent = -1.0
        self.ecn_marks = 0
        self.losses = 0
        self.active = False  # in the rotation


class BadPath:
    """A physical path known bad: its retired EVs and when to probe it next."""

    __slots__ = ("key", "evs", "probe_at", "wait", "probes")

    def __init__(self, key: tuple[int, int], now: float, wait: float):
        self.key, self.evs = key, []
        self.probe_at, self.wait, self.probes = now + wait, wait, 0


class EvSet:
    def __init__(self, planes: int, paths_per_plane: int, evs_per_plane: int,
                 rng: random.Random):
        self.planes = planes
        self.paths_per_plane = paths_per_plane
        self.evs_per_plane = evs_per_plane
        self.rng = rng
        self.by_ev: dict[int, Ev] = {}
        self.bad: dict[tuple[int, int], BadPath] = {}
        self.backups: list[list[Ev]] = [[] for _ in range(planes)]
        self.plane_up = [True] * planes
        self.rotation: list[Ev] = []  # active EVs, planes interleaved
        self.live: list[Ev] = []  # the rotation without EVs of planes that are down
        self.cursor = 0
        for i in range(evs_per_plane):
            for plane in range(planes):
                ev = self._new_ev(plane, i % paths_per_plane)
                ev.active = True
                self.rotation.append(ev)
        self._relive()

    def _relive(self) -> None:
        """Rebuild the list `pick` walks; called whenever the rotation or a plane changes."""
        self.live = [ev for ev in self.rotation if self.plane_up[ev.plane]]
        self.cursor = self.cursor % len(self.live) if self.live else 0

    def set_plane(self, plane: int, up: bool) -> None:
        self.plane_up[plane] = up
        self._relive()

    def _new_ev(self, plane: int, path: int) -> Ev:
        while True:
            choice = self.rng.randrange(1 << 16) * self.paths_per_plane + path
            value = plane << EV_PLANE_SHIFT | choice
            if value not in self.by_ev:
                ev = Ev(value, plane, (plane, path))
                self.by_ev[value] = ev
                return ev

    def usable(self, ev: Ev) -> bool:
        return ev.state in (GOOD, SKIP) and self.plane_up[ev.plane]

    def active_usable(self) -> int:
        return sum(1 for ev in self.rotation if self.usable(ev))

    def pick(self, plane_ready) -> Ev | None:
        """Next EV of the rotation whose plane may send now, preferring the less loaded
        of two neighbours; a SKIP EV is passed over once and is GOOD again."""
        live = self.live
        n = len(live)
        for _ in range(n):
            ev = live[self.cursor]
            self.cursor = (self.cursor + 1) % n
            if ev.state == SKIP:
                ev.state = GOOD
                continue
            if ev.state != GOOD or not plane_ready(ev.plane):
                continue
            other = live[self.cursor]
            if (other.inflight < ev.inflight and other.state == GOOD
                    and plane_ready(other.plane)):
                self.cursor = (self.cursor + 1) % n
                return other
            return ev
        return None

    def retire(self, ev: Ev, now: float, probe_wait: float) -> list[Ev]:
        """Retire every active EV on ev's path and replace each from the same plane.
        Returns the EVs retired (none if the path was already known bad)."""
        if ev.state in (ASSUMED_BAD, DENIED):
            return []
        bad = self.bad.get(ev.key)
        if bad is None:
            bad = self.bad[ev.key] = BadPath(ev.key, now, probe_wait)
        retired = [e for e in self.rotation if e.key == ev.key and e.state in (GOOD, SKIP)]
        if ev not in retired:
            retired.append(ev)
        for e in retired:
            e.state = ASSUMED_BAD
            bad.evs.append(e)
            if e.active:
                self._replace(e)
        self._relive()
        return retired

    def _replace(self, old: Ev) -> None:
        index = self.rotation.index(old)
        old.active = False
        good_paths = [p for p in range(self.paths_per_plane) if (old.plane, p) not in self.bad]
        spare = [e for e in self.backups[old.plane] if e.state == GOOD]
        if spare:
            new = spare[0]
            self.backups[old.plane].remove(new)
        elif good_paths:
            new = self._new_ev(old.plane, self.rng.choice(good_paths))
        else:
            self.rotation.pop(index)  # the whole plane is bad: it shrinks until probes answer
            return
        new.active = True
        self.rotation[index] = new

    def reinstate(self, key: tuple[int, int]) -> list[Ev]:
        """A probe came back: the path's EVs are GOOD again, as backups or back in use."""
        bad = self.bad.pop(key, None)
        if bad is None:
            return []
        plane = key[0]
        for ev in bad.evs:
            ev.state = GOOD
            active = sum(1 for e in self.rotation if e.plane == plane)
            if active < self.evs_per_plane:
                ev.active = True
                self.rotation.append(ev)
            else:
                self.backups[plane].append(ev)
        self._relive()
        return bad.evs

    def due_probes(self, now: float, max_wait: float) -> list[BadPath]:
        due = []
        for bad in self.bad.values():
            if bad.probe_at <= now and self.plane_up[bad.key[0]]:
                due.append(bad)
                bad.probes += 1
                bad.wait = min(bad.wait * 2, max_wait)
                bad.probe_at = now + bad.wait
        return due
