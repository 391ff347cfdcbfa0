"""The EV set of one connection: which entropy values (paths) it sprays over, and their state.

Each plane holds `evs_per_plane` active EVs, drawn at random per connection (a random
subset or spread of the plane's paths, random choice bits), in a rotation that
interleaves the planes so consecutive packets go to different planes. An EV is GOOD,
SKIP (passed over for one rotation after an ECN echo or a trimmed NACK), ASSUMED_BAD
(retired after a real loss, probed until it answers) or DENIED (set by an operator,
never used). An EV whose path stays congested is migrated: a fresh EV of the same plane
on its least used good path takes its slot, and nothing is retired (congestion is not
failure). A set may start pinned to one path (every active EV on it), so that an
experiment can force connections onto one path and watch them migrate away.

EVs map to physical paths by the documented rule (hosts/protocol.py, topologies/paths.py):
plane in the top byte, choice modulo the plane's path count below. EVs that share a path share its
fate, so a loss retires all EVs of that path at once, a retired EV is replaced by one
of the same plane on the least used path not known bad, and one probe per bad path
suffices. When a probe reinstates a path, its EVs take back their share of the plane
from the paths that covered for it, so path diversity recovers after every fault. The
set knows only plane and path numbers, never the fabric.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from hosts.protocol import EV_CHOICE_MASK, ev_choice, ev_plane, make_ev

GOOD, SKIP, ASSUMED_BAD, DENIED = "GOOD", "SKIP", "ASSUMED_BAD", "DENIED"
STATES = (GOOD, SKIP, ASSUMED_BAD, DENIED)

PathKey = tuple[int, int]  # (plane, path index within the plane)


class EvSetError(ValueError):
    """An EV that the set does not hold, or a request that makes no sense for it."""


class Ev:
    """One entropy value and what the sender knows about it."""

    __slots__ = ("ev", "plane", "key", "state", "inflight", "outstanding", "srtt", "rttvar",
                 "last_ack", "last_sent", "ecn_marks", "losses", "active", "ecn_history")

    def __init__(self, ev: int, plane: int, key: PathKey):
        self.ev, self.plane, self.key = ev, plane, key
        self.state = GOOD
        self.inflight = 0
        self.outstanding: list = []  # packets sent on this EV, in send order (lazy cleanup)
        self.srtt = 0.0
        self.rttvar = 0.0
        self.last_ack = 0.0
        self.last_sent = -1.0
        self.ecn_marks = 0
        self.losses = 0
        self.active = False  # in the rotation
        # The ECN echoes of its latest acknowledged packets, one bit each (1: marked),
        # newest in bit 0: the sender's migration rule counts them.
        self.ecn_history = 0

    def __repr__(self) -> str:
        return (f"Ev({self.ev:#010x} plane {self.plane} path {self.key[1]} {self.state}"
                f"{' active' if self.active else ''} inflight {self.inflight})")


class BadPath:
    """A physical path known bad: its retired EVs and when to probe it next."""

    __slots__ = ("key", "evs", "probe_at", "wait", "probes")

    def __init__(self, key: PathKey, now: float, wait: float):
        self.key, self.evs = key, []
        self.probe_at, self.wait, self.probes = now + wait, wait, 0


class EvSet:
    def __init__(self, planes: int, paths_per_plane: int, evs_per_plane: int,
                 rng: random.Random, pin: PathKey | None = None):
        if planes < 1 or paths_per_plane < 1 or evs_per_plane < 1:
            raise EvSetError(f"an EV set needs planes, paths and EVs (got {planes}, "
                             f"{paths_per_plane}, {evs_per_plane})")
        if pin is not None and not 0 <= pin[0] < planes:
            raise EvSetError(f"pinned to plane {pin[0]}; the connection has {planes} planes")
        self.planes = planes
        self.paths_per_plane = paths_per_plane
        self.evs_per_plane = evs_per_plane
        self.rng = rng
        self.by_ev: dict[int, Ev] = {}
        self.bad: dict[PathKey, BadPath] = {}
        self.backups: list[list[Ev]] = [[] for _ in range(planes)]
        self.plane_up = [True] * planes
        self.rotation: list[Ev] = []  # active EVs, planes interleaved
        self.live: list[Ev] = []  # the rotation without EVs of planes that are down
        self.sendable: list[int] = []  # planes with an EV in `live`, in order
        self.plane_evs: list[list[Ev]] = []  # the rotation's EVs, by plane
        # EVs taken out of the rotation while usable (rebalancing after a reinstatement)
        # whose packets may still be in flight: the sender keeps judging those packets.
        self.draining: list[Ev] = []
        self.cursor = 0
        # Each plane gets the same number of EVs (planes stay equally loaded). Within a
        # plane the paths come in a random order, each at most once more than another:
        # a random subset of the paths when the set is smaller than the plane, an even
        # spread with the extra EVs on random paths when it is larger. Different
        # connections draw different orders, so they do not all start on the same spine.
        if pin is not None:
            # Pinned: the plane's share of EVs, every one on the pinned path (the path
            # index names it modulo the plane's path count, as an EV's choice does); the
            # other planes start empty. Replacements and migrations still draw from every
            # path of the plane.
            plane, path = pin[0], pin[1] % paths_per_plane
            for _ in range(evs_per_plane):
                ev = self._new_ev(plane, path)
                ev.active = True
                self.rotation.append(ev)
            self._relive()
            return
        by_plane = []
        for plane in range(planes):
            order = list(range(paths_per_plane))
            rng.shuffle(order)
            by_plane.append([self._new_ev(plane, order[i % paths_per_plane])
                             for i in range(evs_per_plane)])
        for i in range(evs_per_plane):
            for plane in range(planes):
                ev = by_plane[plane][i]
                ev.active = True
                self.rotation.append(ev)
        self._relive()

    # ------------------------------------------------------------------ queries
    def path_key(self, ev: int) -> PathKey:
        return ev_plane(ev), ev_choice(ev) % self.paths_per_plane

    def usable(self, ev: Ev) -> bool:
        return ev.state in (GOOD, SKIP) and self.plane_up[ev.plane]

    def active_usable(self) -> int:
        return sum(1 for ev in self.rotation if self.usable(ev))

    def states(self) -> dict[str, int]:
        """How many active EVs are in each state (for progress logs)."""
        counts = dict.fromkeys(STATES, 0)
        for ev in self.rotation:
            counts[ev.state] += 1
        return counts

    # ------------------------------------------------------------------ spraying
    def _relive(self) -> None:
        """Rebuild the list `pick` walks; called whenever the rotation or a plane changes."""
        self.live = [ev for ev in self.rotation if self.plane_up[ev.plane]]
        self.cursor = self.cursor % len(self.live) if self.live else 0
        self.sendable = sorted({ev.plane for ev in self.live})
        self.plane_evs = [[] for _ in range(self.planes)]
        for ev in self.rotation:
            self.plane_evs[ev.plane].append(ev)

    def set_plane(self, plane: int, up: bool) -> None:
        self.plane_up[plane] = up
        self._relive()

    def pick(self, plane_ready: Callable[[int], bool]) -> Ev | None:
        """Next EV of the rotation whose plane may send now, preferring the less loaded
        of two neighbours; a SKIP EV is passed over once and is GOOD again.

        Looking at two neighbours instead of the whole set keeps this O(1) per packet
        while still steering away from EVs whose packets are slow to be acknowledged.
        """
        live = self.live
        n = len(live)
        looked = False
        for _ in range(n):
            ev = live[self.cursor]
            if ev.state != GOOD:
                self.cursor = (self.cursor + 1) % n
                if ev.state == SKIP:
                    ev.state = GOOD
                continue
            if not plane_ready(ev.plane):
                if not looked:
                    looked = True
                    if not any(map(plane_ready, self.sendable)):
                        return None  # every plane is paced: no need to walk every EV
                self.cursor = (self.cursor + 1) % n
                continue
            self.cursor = (self.cursor + 1) % n
            other = live[self.cursor]
            if (other.inflight < ev.inflight and other.state == GOOD
                    and plane_ready(other.plane)):
                self.cursor = (self.cursor + 1) % n
                return other
            return ev
        return None

    # ------------------------------------------------------------------ state changes
    def retire(self, ev: Ev, now: float, probe_wait: float) -> list[Ev]:
        """Retire every EV on ev's path (active and backups) and replace the active ones
        from the same plane. Returns the EVs retired (none if ev was not usable)."""
        if ev.state in (ASSUMED_BAD, DENIED):
            return []
        bad = self.bad.get(ev.key)
        if bad is None:
            bad = self.bad[ev.key] = BadPath(ev.key, now, probe_wait)
        retired = [e for e in self.rotation if e.key == ev.key and e.state in (GOOD, SKIP)]
        if ev not in retired:
            retired.append(ev)
        spare = self.backups[ev.plane]
        retired += [e for e in spare if e.key == ev.key and e not in retired]
        self.backups[ev.plane] = [e for e in spare if e.key != ev.key]
        for e in retired:
            e.state = ASSUMED_BAD
            bad.evs.append(e)
            if e.active:
                self._replace(e)
        self._relive()
        return retired

    def _replace(self, old: Ev) -> None:
        """Take `old` out of the rotation, putting an EV of the same plane in its slot."""
        index = self.rotation.index(old)
        old.active = False
        plane = old.plane
        spare = [e for e in self.backups[plane] if e.state == GOOD and e.key not in self.bad]
        if spare:
            new = spare[0]
            self.backups[plane].remove(new)
        else:
            good = [p for p in range(self.paths_per_plane) if (plane, p) not in self.bad]
            if not good:
                self.rotation.pop(index)  # the whole plane is bad: it shrinks until probes answer
                return
            # The least used good path, so the plane's traffic stays spread evenly.
            use = dict.fromkeys(good, 0)
            for e in self.rotation:
                if e.plane == plane and e.key[1] in use and e is not old:
                    use[e.key[1]] += 1
            least = min(use.values())
            new = self._new_ev(plane, self.rng.choice([p for p in good if use[p] == least]))
        new.active = True
        self.rotation[index] = new

    def migrate(self, old: Ev) -> Ev | None:
        """Congestion, not failure: move old's slot to the least used path of its plane
        not known bad (counting the other active EVs), if that is another path than
        old's. The slot gets a spare of that path, else a fresh EV; `old` stays GOOD and
        becomes a spare, `draining` while it has packets in flight (they are still
        judged for loss), so EVs are reused and the set does not grow with every move.
        None (nothing changes) if old is not an active usable EV, or if its own path is
        already the plane's least used: a new EV on the same path would change
        nothing."""
        if not old.active or not self.usable(old):
            return None
        plane = old.plane
        use = {p: 0 for p in range(self.paths_per_plane) if (plane, p) not in self.bad}
        for e in self.rotation:
            if e.plane == plane and e.key[1] in use and e is not old:
                use[e.key[1]] += 1
        least = min(use.values())
        if use.get(old.key[1]) == least:
            return None
        path = self.rng.choice([p for p in use if use[p] == least])
        spares = self.backups[plane]
        new = next((e for e in spares if e.key[1] == path and e.state == GOOD), None)
        if new is None:
            new = self._new_ev(plane, path)
        else:
            spares.remove(new)
        new.ecn_history = 0
        index = self.rotation.index(old)
        old.active = False
        spares.append(old)
        if old.outstanding and old not in self.draining:
            self.draining.append(old)
        new.active = True
        self.rotation[index] = new
        self._relive()
        return new

    def _new_ev(self, plane: int, path: int) -> Ev:
        """A fresh EV of `plane` whose random choice bits name `path` by the rule of
        topologies/paths.py (choice modulo the plane's path count)."""
        slots = (EV_CHOICE_MASK + 1) // self.paths_per_plane
        while True:
            choice = self.rng.randrange(slots) * self.paths_per_plane + path
            value = make_ev(plane, choice)
            if value not in self.by_ev:
                ev = Ev(value, plane, (plane, path))
                self.by_ev[value] = ev
                return ev

    def _active_in(self, plane: int) -> int:
        return sum(1 for e in self.rotation if e.plane == plane)

    def reinstate(self, key: PathKey) -> list[Ev]:
        """A probe came back: the path's EVs are GOOD again and the plane is rebalanced,
        so the path carries its share of the plane's traffic once more.

        While the path was bad, _replace() refilled the plane from the surviving paths;
        leaving the healed path's EVs as mere backups would shrink path diversity with
        every fault. So a reinstated EV fills a free slot of the plane, else takes the
        slot of an active EV on the most used path while that path holds at least two
        more than the healed one. An EV swapped out becomes a backup and is `draining`
        until what it has in flight is answered or found lost."""
        bad = self.bad.pop(key, None)
        if bad is None:
            return []
        plane = key[0]
        for ev in bad.evs:
            ev.state = GOOD
            if self._active_in(plane) < self.evs_per_plane:
                ev.active = True
                self.rotation.append(ev)
                continue
            busiest = self._busiest_other(plane, key)
            if busiest is None:
                self.backups[plane].append(ev)
                continue
            index = self.rotation.index(busiest)
            busiest.active = False
            self.backups[plane].append(busiest)
            if busiest.outstanding:
                self.draining.append(busiest)
            ev.active = True
            self.rotation[index] = ev
        self._relive()
        return bad.evs

    def _busiest_other(self, plane: int, key: PathKey) -> Ev | None:
        """An active usable EV on the plane's most used path other than `key`, if that
        path holds at least two more active EVs than `key` does (else swapping one
        would not even the plane out)."""
        use: dict[PathKey, list[Ev]] = {}
        for e in self.rotation:
            if e.plane == plane and e.state in (GOOD, SKIP):
                use.setdefault(e.key, []).append(e)
        mine = len(use.pop(key, []))
        if not use:
            return None
        most = max(use.values(), key=len)
        if len(most) < mine + 2:
            return None
        # The least loaded of them, so as few packets as possible are left draining.
        return min(most, key=lambda e: e.inflight)

    def deny(self, value: int) -> Ev:
        """An operator takes an EV out of use for good (until allow())."""
        ev = self.by_ev.get(value)
        if ev is None:
            plane, path = self.path_key(value)
            if plane >= self.planes:
                raise EvSetError(f"EV {value:#010x} names plane {plane}; the connection "
                                 f"has {self.planes}")
            ev = self.by_ev[value] = Ev(value, plane, (plane, path))
        if ev.state == DENIED:
            return ev
        was_usable = ev.state in (GOOD, SKIP)
        ev.state = DENIED
        if ev in self.backups[ev.plane]:
            self.backups[ev.plane].remove(ev)
        bad = self.bad.get(ev.key)
        if bad is not None and ev in bad.evs:
            bad.evs.remove(ev)
            if not bad.evs:  # the path still needs an EV to be probed on
                stand_in = self._new_ev(ev.plane, ev.key[1])
                stand_in.state = ASSUMED_BAD
                bad.evs.append(stand_in)
        if ev.active and was_usable:
            self._replace(ev)
        elif ev.active:
            self.rotation.remove(ev)
            ev.active = False
        self._relive()
        return ev

    def allow(self, value: int) -> Ev:
        """Undo deny(): the EV becomes a GOOD backup (or active, if its plane is short)."""
        ev = self.by_ev.get(value)
        if ev is None or ev.state != DENIED:
            raise EvSetError(f"EV {value:#010x} is not denied")
        if ev.key in self.bad:
            ev.state = ASSUMED_BAD
            self.bad[ev.key].evs.append(ev)
            return ev
        ev.state = GOOD
        if self._active_in(ev.plane) < self.evs_per_plane:
            ev.active = True
            self.rotation.append(ev)
            self._relive()
        else:
            self.backups[ev.plane].append(ev)
        return ev

    def due_probes(self, now: float, max_wait: float) -> list[BadPath]:
        """Bad paths whose next probe is due (and whose plane is up); reschedules them
        with doubled waits up to max_wait."""
        due = []
        for bad in self.bad.values():
            if bad.probe_at <= now and self.plane_up[bad.key[0]] and bad.evs:
                due.append(bad)
                bad.probes += 1
                bad.wait = min(bad.wait * 2, max_wait)
                bad.probe_at = now + bad.wait
        return due
