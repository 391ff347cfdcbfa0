"""The EV set of one connection: which entropy values (paths) it sprays over, and their state.

Each plane holds the same number of active EVs (the connection's `ev_count` split over
its planes), drawn at random per connection: a random subset of the plane's paths
(distinct paths first, each path at most once more than another when the set is larger
than the plane), random choice bits. They sit in a rotation that interleaves the planes
so consecutive packets go to different planes, and a plane's paths so that a plane's
consecutive packets go to different paths; after a retirement or a reinstatement the
plane's EVs are spread round its slots again (`_interleave`). With them each plane
draws a backup set of as many EVs (`backups`), continuing the same random order of its
paths: on paths the active set does not use while the plane has any left, then spread
evenly over the others. An EV is GOOD, SKIP (passed over for one
rotation after an ECN echo or a trimmed NACK, or while its path is held: `hold`),
ASSUMED_BAD (retired after a real loss, probed until it has earned its way back) or
DENIED (set by an operator, never used). An
EV whose path stays congested is migrated: an EV of the same plane on its least used
good path takes its slot (a backup on such a path if the plane has one, the first in
order), and nothing is retired (congestion is not failure). A
set may start pinned to one path (every active EV on it), so that an experiment can
force connections onto one path and watch them migrate away; a pinned set draws no
backups, so its replacements spread over the plane's paths.

A connection may be given the paths it prefers (`preferred`: a same-rack pair's direct
path, which never climbs to a T1) and the paths it falls back on only while every
preferred path of a plane is bad (`fallback`); the other paths of the plane it never
uses. EVs map to physical paths by the documented rule (hosts/protocol.py,
topologies/paths.py): plane in the top byte, choice modulo the plane's path count below.
EVs that share a path share its fate, so a loss retires all EVs of that path at once
(backups on it too), and one probe per bad path suffices. A retired EV is replaced by the
first backup of its plane, in the order drawn, on a path the connection may use and not
known bad; once the plane's backups are used up (or all on bad paths), by a fresh EV on
the plane's least used path not known bad (a path with no EV of the set, while there is
one), at random among equals.

A retired path comes back only when it has earned it (hysteresis): its probes back off
(the wait doubles while they go unanswered, up to a cap) and a reply counts only if it
comes back within the connection's loss bound and before the path's next turn, and
carries no ECN echo; after a success the next probe follows `probe_spacing_s` later.
The probes' own record tells a healed path from a lossy one: the failures before the
path's first success are its outage; a failure after it, or a first probe answered at
once (no outage at all), shows a path that loses packets while it answers. So
`probe_successes` successes in a row reinstate a path that failed its first probe and
none since its first success (a healed one), and a lossy one needs
`probe_successes_lossy` (a run a path losing 10% passes at most one time in a
thousand). The backoff outlives the reinstatement: a path retired again soon after
starts from twice the wait it had reached, so a path that keeps failing spends ever
longer out; its record starts afresh with each retirement. When a path comes back,
its EVs take back their share of the plane from the paths that covered for it, so path
diversity recovers after every fault. The set knows only plane and path numbers, never
the fabric.

An operator (the control API, hosts/mrc_ctl.py) acts on paths as the set does: denying an
EV denies the path it names (`deny`: every EV of the set on it is DENIED, none is drawn
on it, a retired one is no longer probed) until `allow`, when its EVs take back their
share of the plane as after a reinstatement. `replace` puts a given EV in another's
place (same plane), and `set_explicit` makes the set exactly a given array (OCP MRC's
EXPLICIT mode): from then on the set draws no EV of its own, so a retired EV's slot
goes to a spare of its plane or stays empty until its path returns.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from hosts.protocol import EV_CHOICE_MASK, ev_plane, make_ev
from topologies.paths import path_index

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
    """A physical path known bad: its retired EVs and the state of its probes.

    `wait` is the backoff between unanswered probes; `pending` the probe awaiting its
    reply, as (sequence number, send time); `successes` the replies in a row that came
    back in time and unmarked; `answered` whether any has since the retirement, and
    `lossy` whether a probe failed after that (the path returns at the sender's
    `probe_successes`, or `probe_successes_lossy` if lossy: EvSet.probe_answered).
    `quiet` are those of `evs` that were backups never sent on: retired and reinstated
    with the path, but not reported (EvSet.retire)."""

    __slots__ = ("key", "evs", "quiet", "probe_at", "wait", "probes", "pending", "successes",
                 "answered", "lossy", "outage")

    def __init__(self, key: PathKey, now: float, wait: float):
        self.key, self.evs = key, []
        self.quiet: list[Ev] = []
        self.probe_at, self.wait, self.probes = now + wait, wait, 0
        self.pending: tuple[int, float] | None = None
        self.successes = 0
        self.answered = self.lossy = False
        # An outage its probes could not see: its plane went down while it was bad, or
        # it was retired just after its plane came back (EvSet.set_plane, retire).
        self.outage = False


class EvSet:
    def __init__(self, planes: int, paths_per_plane: int, evs_per_plane: int,
                 rng: random.Random, pin: tuple[int, int | None] | None = None,
                 preferred: Sequence[int] | None = None, fallback: Sequence[int] = ()):
        if planes < 1 or paths_per_plane < 1 or evs_per_plane < 1:
            raise EvSetError(f"an EV set needs planes, paths and EVs (got {planes}, "
                             f"{paths_per_plane}, {evs_per_plane})")
        if pin is not None and not 0 <= pin[0] < planes:
            raise EvSetError(f"pinned to plane {pin[0]}; the connection has {planes} planes")
        self.planes = planes
        self.paths_per_plane = paths_per_plane
        self.evs_per_plane = evs_per_plane
        self.rng = rng
        # The paths of each plane this connection sprays over, and those it may take
        # only while every preferred path of the plane is bad (module docstring).
        self.preferred = tuple(range(paths_per_plane)) if preferred is None else tuple(preferred)
        self.fallback = tuple(fallback)
        if not self.preferred or not all(0 <= p < paths_per_plane
                                         for p in (*self.preferred, *self.fallback)):
            raise EvSetError(f"preferred paths {self.preferred} and fallback {self.fallback} "
                             f"must be among the plane's {paths_per_plane}")
        self.by_ev: dict[int, Ev] = {}
        self.bad: dict[PathKey, BadPath] = {}
        self.denied: set[PathKey] = set()  # paths an operator took out of use (deny)
        # Active EVs each plane holds when nothing is wrong (`ev_count` is their sum),
        # and whether the set is an operator's explicit array (it draws no EV itself).
        self.quota = [evs_per_plane] * planes
        self.explicit = False
        # The probe backoff of paths reinstated, and when: it outlives the reinstatement.
        self.backoff: dict[PathKey, tuple[float, float]] = {}
        self.unanswered: list[BadPath] = []  # paths whose probe due_probes() gave up on
        self.backups: list[list[Ev]] = [[] for _ in range(planes)]
        self.plane_up = [True] * planes
        # When each plane last came back up (set_plane): a path retired soon after lost
        # packets to the port's return, not to a lossy path (retire()).
        self.plane_up_at = [float("-inf")] * planes
        self.rotation: list[Ev] = []  # active EVs, planes interleaved
        self.live: list[Ev] = []  # the rotation without EVs of planes that are down
        self.sendable: list[int] = []  # planes with an EV in `live`, in order
        self.plane_evs: list[list[Ev]] = []  # the rotation's EVs, by plane
        # EVs taken out of the rotation while usable (rebalancing after a reinstatement)
        # whose packets may still be in flight: the sender keeps judging those packets.
        self.draining: list[Ev] = []
        # Paths held out of the rotation while a probe checks whether a packet late on
        # them was lost (the sender's suspects): their EVs stay SKIP until released.
        self.held: set[PathKey] = set()
        self.cursor = 0
        # Each plane gets the same number of EVs (planes stay equally loaded). Within a
        # plane the preferred paths come in a random order, each at most once more than
        # another: a random subset of the paths when the set is smaller than the plane
        # (the NICs' way, section 2.4 of the paper), an even spread with the extra EVs
        # on random paths when it is larger. Different connections draw different
        # orders: they do not coordinate, so their subsets differ and some paths end
        # up busier than others, which ECN migration evens out. The backup set
        # continues each plane's order (module docstring); it is drawn after every
        # active EV, so the active set is the same with or without it.
        if pin is not None:
            # Pinned: the plane's share of EVs, every one on the pinned path (the path
            # index names it modulo the plane's path count, as an EV's choice does), or
            # spread over the plane's paths when the index is None; the other planes
            # start empty. Replacements and migrations still draw from every
            # path of the plane.
            plane, order = pin[0], list(self.preferred)
            if pin[1] is None:
                rng.shuffle(order)
            for i in range(evs_per_plane):
                # [plane, null]: the plane's paths as an unpinned plane spreads them.
                path = order[i % len(order)] if pin[1] is None else pin[1] % paths_per_plane
                ev = self._new_ev(plane, path)
                ev.active = True
                self.rotation.append(ev)
            self._relive()
            return
        by_plane, orders = [], []
        for plane in range(planes):
            order = list(self.preferred)
            rng.shuffle(order)
            orders.append(order)
            by_plane.append([self._new_ev(plane, order[i % len(order)])
                             for i in range(evs_per_plane)])
        for i in range(evs_per_plane):
            for plane in range(planes):
                ev = by_plane[plane][i]
                ev.active = True
                self.rotation.append(ev)
        for plane, order in enumerate(orders):
            self.backups[plane] = [self._new_ev(plane, order[i % len(order)])
                                   for i in range(evs_per_plane, 2 * evs_per_plane)]
        self._relive()

    # ------------------------------------------------------------------ queries
    def path_key(self, ev: int) -> PathKey:
        return ev_plane(ev), path_index(ev, self.paths_per_plane)

    def usable(self, ev: Ev) -> bool:
        return ev.state in (GOOD, SKIP) and self.plane_up[ev.plane]

    @property
    def ev_count(self) -> int:
        """The active EVs of the set when nothing is wrong (OCP MRC's `ev_count`)."""
        return sum(self.quota)

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

    def set_plane(self, plane: int, up: bool, now: float = float("-inf"),
                  probe_wait: float | None = None) -> None:
        """The plane goes up or down for this connection. On its return, the bad paths
        of the plane start their probes afresh, `probe_wait` from now: the backoff they
        built while the plane was down, or while it failed, measured the plane, not
        them, and a path kept out for a backoff of seconds after its plane is back is
        capacity the connection lacks for nothing."""
        self.plane_up[plane] = up
        if up:
            self.plane_up_at[plane] = now
            if probe_wait is not None:
                for bad in self.bad.values():
                    if bad.key[0] == plane:
                        bad.wait, bad.probe_at, bad.pending = probe_wait, now + probe_wait, None
        else:
            # A plane that went down while a path of it was bad is an outage the path's
            # probes could not see (none is sent on a plane that is down): its first
            # probe answered after the plane returns says nothing of loss.
            for bad in self.bad.values():
                if bad.key[0] == plane:
                    bad.outage = True
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
                if ev.state == SKIP and ev.key not in self.held:
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
    def hold(self, key: PathKey) -> None:
        """Pass over the path's EVs (SKIP) until `release(key)`: a path under suspicion
        takes no new packets, and stays usable (it counts for ev_min_active)."""
        self.held.add(key)
        for ev in self.rotation:
            if ev.key == key and ev.state == GOOD:
                ev.state = SKIP

    def release(self, key: PathKey) -> None:
        """The path's EVs are GOOD again on their next turn."""
        self.held.discard(key)

    def allowed(self, plane: int) -> list[int]:
        """The paths of `plane` the connection may put EVs on now: its preferred paths
        not known bad, else (every one of them bad) its fallback paths not known bad."""
        for paths in (self.preferred, self.fallback):
            good = [p for p in paths if (plane, p) not in self.bad
                    and (plane, p) not in self.denied]
            if good:
                return good
        return []

    def retire(self, ev: Ev, now: float, probe_wait: float,
               max_wait: float = float("inf"), lost_sent_at: float | None = None
               ) -> list[Ev]:
        """Retire every EV on ev's path (active and backups) and replace the active ones
        from the same plane. Returns the EVs retired that were in use: active, or
        spares that have carried packets (none if ev was not usable). The plane's
        backups never sent on share the path's fate too, but are not returned: a
        retirement reports what it took out of use, so the count of retired EVs does
        not grow with the size of the backup set (reinstate() reports the same ones).

        The path's first probe waits `probe_wait`, unless it was reinstated before: then
        twice the wait its probes had reached (its reinstatement failed), halved for
        each such wait it has since stayed good, never below `probe_wait` nor above
        `max_wait`. So a path that keeps failing spends ever longer out, and one that
        failed long ago starts afresh. `lost_sent_at`: when the packet whose loss
        retired the path left (default `now`)."""
        if ev.state in (ASSUMED_BAD, DENIED):
            return []
        bad = self.bad.get(ev.key)
        if bad is None:
            bad = self.bad[ev.key] = BadPath(ev.key, now, self._first_wait(ev.key, now,
                                                                           probe_wait, max_wait))
            # What it lost left within the first probe's wait of its plane's return: it
            # went to the port coming up (its routes restored a moment after the
            # carrier), an outage, not a lossy path. The packet's send time decides,
            # not the verdict's: a timeout comes a timeout later, past that wait.
            sent = now if lost_sent_at is None else lost_sent_at
            bad.outage = sent - self.plane_up_at[ev.plane] < bad.wait
        retired = [e for e in self.rotation if e.key == ev.key and e.state in (GOOD, SKIP)]
        if ev not in retired:
            retired.append(ev)
        spare = self.backups[ev.plane]
        on_path = [e for e in spare if e.key == ev.key and e not in retired]
        quiet = [e for e in on_path if e.last_sent < 0]
        retired += [e for e in on_path if e.last_sent >= 0]
        self.backups[ev.plane] = [e for e in spare if e.key != ev.key]
        for e in quiet:
            e.state = ASSUMED_BAD
        bad.quiet += quiet
        for e in retired:
            e.state = ASSUMED_BAD
            bad.evs.append(e)
            if e.active:
                self._replace(e)
        bad.evs += quiet
        self._interleave(ev.plane)
        self._relive()
        return retired

    def _first_wait(self, key: PathKey, now: float, probe_wait: float,
                    max_wait: float) -> float:
        remembered = self.backoff.pop(key, None)
        if remembered is None:
            return probe_wait
        wait, since = remembered
        wait = min(2 * wait, max_wait)
        good_for = now - since
        while wait > probe_wait and good_for >= wait:
            good_for -= wait
            wait /= 2
        return max(probe_wait, wait)

    def _replace(self, old: Ev) -> None:
        """Take `old` out of the rotation, putting an EV of the same plane in its slot:
        the first backup of the plane on a path it may use (`allowed`: none known bad),
        else a fresh EV on the least used such path (the backups are used up)."""
        index = self.rotation.index(old)
        old.active = False
        plane = old.plane
        good = self.allowed(plane)
        spare = [e for e in self.backups[plane] if e.state == GOOD and e.key[1] in good]
        if spare:
            new = spare[0]
            self.backups[plane].remove(new)
        else:
            if not good or self.explicit:
                # The whole plane is bad (or an explicit array has no spare): it shrinks
                # until probes answer.
                self.rotation.pop(index)
                return
            new = self._new_ev(plane, self._least_used(plane, good, old))
        new.active = True
        self.rotation[index] = new

    def _least_used(self, plane: int, good: list[int], leaving: Ev | None = None) -> int:
        """The least used of the plane's `good` paths (counting the active EVs but
        `leaving`), at random among equals, so the plane's traffic stays spread evenly."""
        use = dict.fromkeys(good, 0)
        for e in self.rotation:
            if e.plane == plane and e.key[1] in use and e is not leaving:
                use[e.key[1]] += 1
        least = min(use.values())
        return self.rng.choice([p for p in good if use[p] == least])

    def migrate(self, old: Ev) -> Ev | None:
        """Congestion, not failure: move old's slot to the least used path of its plane
        it may use (`allowed`; counting the other active EVs), if that is another path than
        old's. The slot gets the first spare (backup), in order, on such a path, else a
        fresh EV on one of them at random; `old` stays GOOD and
        becomes a spare, `draining` while it has packets in flight (they are still
        judged for loss), so EVs are reused and the set does not grow with every move.
        None (nothing changes) if old is not an active usable EV, or if its own path is
        already the plane's least used and the connection uses every path it may: a
        new EV on the same path would change nothing, and moving it to a path as used
        as its own would only trade one shared path for another."""
        if not old.active or not self.usable(old):
            return None
        plane = old.plane
        use = dict.fromkeys(self.allowed(plane), 0)
        if not use:
            return None
        for e in self.rotation:
            if e.plane == plane and e.key[1] in use and e is not old:
                use[e.key[1]] += 1
        least = min(use.values())
        mine = use.get(old.key[1])
        # Another path this connection uses less: one that evens the plane out, or one
        # it does not use at all (the paper swaps a marked EV for an unused one: with
        # fewer EVs than paths, each on its own path, no other path is "less used").
        targets = [p for p in use if use[p] == least and p != old.key[1]]
        if not targets or (mine == least and least > 0):
            return None
        spares = self.backups[plane]
        new = next((e for e in spares if e.key[1] in targets and e.state == GOOD), None)
        if new is None:
            if self.explicit:
                return None  # an explicit array moves only to its own spares
            new = self._new_ev(plane, self.rng.choice(targets))
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

    def reinstate(self, key: PathKey, now: float = 0.0) -> list[Ev]:
        """The path has earned its way back: its EVs are GOOD again and the plane is
        rebalanced, so the path carries its share of the plane's traffic once more.

        While the path was bad, _replace() refilled the plane from the surviving paths;
        leaving the healed path's EVs as mere backups would shrink path diversity with
        every fault. So a reinstated EV first takes the slot of an active EV on a path
        the plane no longer needs (a fallback path, once a preferred one is back), then
        fills a free slot of the plane, else takes the slot of an active EV on the most
        used path while that path holds at least two more than the healed one. An EV
        swapped out becomes a backup and is `draining` until what it has in flight is
        answered or found lost. A path the connection may not use now (a fallback path
        while a preferred one is good) gets its EVs back as backups only. The probe
        backoff is remembered (retire()). Returns the EVs back, but for the backups
        that were retired without a report (retire())."""
        bad = self.bad.pop(key, None)
        if bad is None:
            return []
        self.backoff[key] = (bad.wait, now)
        for ev in bad.evs:
            ev.state = GOOD
        self._bring_back(key, bad.evs)
        quiet = set(map(id, bad.quiet))
        return [ev for ev in bad.evs if id(ev) not in quiet]

    def _bring_back(self, key: PathKey, evs: list[Ev]) -> None:
        """GOOD EVs of path `key` back in use: each takes the slot of an EV the plane no
        longer needs, a free slot, or one of the most used path's (reinstate())."""
        plane = key[0]
        allowed = self.allowed(plane)
        for ev in evs:
            if key[1] not in allowed:
                self.backups[plane].append(ev)
                continue
            out = next((e for e in self.rotation if e.plane == plane
                        and e.key[1] not in allowed and e.state in (GOOD, SKIP)), None)
            if out is None and self._active_in(plane) < self.quota[plane]:
                ev.active = True
                self.rotation.append(ev)
                continue
            out = out or self._busiest_other(plane, key)
            if out is None:
                self.backups[plane].append(ev)
                continue
            index = self.rotation.index(out)
            out.active = False
            self.backups[plane].append(out)
            if out.outstanding:
                self.draining.append(out)
            ev.active = True
            self.rotation[index] = ev
        # More fallback EVs than the path had retired ones (some were denied meanwhile):
        # the rest give way too, to EVs of the paths the plane may use again.
        for stray in [e for e in self.rotation if e.plane == plane and e.key[1] not in allowed
                      and e.state in (GOOD, SKIP)]:
            self._replace(stray)
            self.backups[plane].append(stray)
            if stray.outstanding:
                self.draining.append(stray)
        self._interleave(plane)
        self._relive()

    def _interleave(self, plane: int) -> None:
        """Spread the plane's EVs over the plane's slots of the rotation so that each
        path's EVs are evenly spaced, as the set starts: the k-th of a path's n EVs at
        (k + 1/2)/n of the way round, paths in the order they first come. Without it
        the EVs a path gets back take the slots they were given one after another, and
        the path receives a burst of dozens of the plane's packets in a row: a queue
        on its links, ECN and trims where the plane has room (measured: runs of 30 of
        128 after a path of four returned)."""
        slots = [i for i, e in enumerate(self.rotation) if e.plane == plane]
        by_path: dict[int, list[Ev]] = {}
        for i in slots:
            by_path.setdefault(self.rotation[i].key[1], []).append(self.rotation[i])
        rank = {path: r for r, path in enumerate(by_path)}
        spread = sorted(((k + 0.5) / len(evs), rank[path], k)
                        for path, evs in by_path.items() for k in range(len(evs)))
        paths = list(by_path)
        for i, (_, r, k) in zip(slots, spread):
            self.rotation[i] = by_path[paths[r]][k]

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

    def deny(self, value: int) -> list[Ev]:
        """An operator takes the path `value` names out of use until allow(): every EV
        of the set on it becomes DENIED (`value` too, remembered if the set never drew
        it), an active one is replaced in its plane, no EV is drawn on the path, and a
        retired path is no longer probed. EVs share their path's fate, DENIED as
        ASSUMED_BAD. Returns the EVs newly denied, `value`'s first if it is one."""
        named = self.by_ev.get(value)
        if named is None:
            plane, path = self.path_key(value)
            if plane >= self.planes:
                raise EvSetError(f"EV {value:#010x} names plane {plane}; the connection "
                                 f"has {self.planes}")
            named = self.by_ev[value] = Ev(value, plane, (plane, path))
        key, plane = named.key, named.plane
        self.denied.add(key)
        self.bad.pop(key, None)  # nothing to probe: the operator decides when it returns
        newly = []
        for ev in [named] + [e for e in self.by_ev.values() if e.key == key and e is not named]:
            if ev.state == DENIED:
                continue
            was_usable = ev.state in (GOOD, SKIP)
            ev.state = DENIED
            newly.append(ev)
            if ev in self.backups[plane]:
                self.backups[plane].remove(ev)
            if ev.active and was_usable:
                self._replace(ev)
            elif ev.active:
                self.rotation.remove(ev)
                ev.active = False
        self._relive()
        return newly

    def allow(self, value: int) -> list[Ev]:
        """Undo deny() for the path `value` names: its EVs are GOOD again and take back
        their share of the plane (as after a reinstatement); a plane left short is
        filled up again (unless the set is an explicit array). Returns them."""
        plane, path = self.path_key(value)
        if (plane, path) not in self.denied:
            raise EvSetError(f"EV {value:#010x}: its path (plane {plane}, path {path}) is "
                             "not denied")
        self.denied.discard((plane, path))
        evs = [e for e in self.by_ev.values() if e.key == (plane, path) and e.state == DENIED]
        for ev in evs:
            ev.state = GOOD
        self._bring_back((plane, path), evs)
        self._fill(plane)
        self._relive()
        return evs

    def _fill(self, plane: int) -> None:
        """Active EVs up to the plane's quota, from its spares or new EVs on its least
        used allowed paths (never for an explicit array)."""
        while not self.explicit and self._active_in(plane) < self.quota[plane]:
            good = self.allowed(plane)
            if not good:
                return
            spares = [e for e in self.backups[plane] if e.state == GOOD and e.key[1] in good]
            if spares:
                new = spares[0]
                self.backups[plane].remove(new)
            else:
                new = self._new_ev(plane, self._least_used(plane, good))
            new.active = True
            self.rotation.append(new)

    def replace(self, old_value: int, new_value: int) -> tuple[Ev, Ev]:
        """The EV `new_value` takes the place of `old_value` in the set (OCP MRC's
        REPLACE_EV): its slot in the rotation if `old` is active, else its place among
        the spares. The two must be of one plane, since every plane keeps its share.
        The new EV is GOOD, unless its path is denied or known bad (then it shares
        that state, out of the rotation). `old` leaves the set; packets it has in
        flight are still judged (draining). Returns (old, new)."""
        old = self.by_ev.get(old_value)
        if old is None:
            raise EvSetError(f"EV {old_value:#010x} is not in the connection's set")
        if new_value in self.by_ev:
            raise EvSetError(f"EV {new_value:#010x} is in the set already")
        plane, path = self.path_key(new_value)
        if plane != old.plane:
            raise EvSetError(f"EV {new_value:#010x} is of plane {plane}; a replacement "
                             f"stays in the plane of the EV it replaces ({old.plane})")
        key = (plane, path)
        new = Ev(new_value, plane, key)
        if key in self.denied:
            new.state = DENIED
        elif key in self.bad:
            new.state = ASSUMED_BAD
            self.bad[key].evs.append(new)
        del self.by_ev[old_value]
        self.by_ev[new_value] = new
        if old.state == ASSUMED_BAD and old.key in self.bad:
            bad = self.bad[old.key]
            bad.evs.remove(old)
            if old in bad.quiet:
                bad.quiet.remove(old)
            if not bad.evs:  # nothing of the set is on that path any more
                del self.bad[old.key]
        spares = self.backups[plane]
        if old.active:
            index = self.rotation.index(old)
            old.active = False
            if new.state == GOOD:
                new.active = True
                self.rotation[index] = new
            else:
                self.rotation.pop(index)
            if old.outstanding and old.state in (GOOD, SKIP):
                self.draining.append(old)
        elif old in spares:
            spares.remove(old)
            if new.state == GOOD:
                spares.append(new)
        elif new.state == GOOD:
            spares.append(new)
        self._relive()
        return old, new

    def set_explicit(self, values: Sequence[int]) -> list[Ev]:
        """The set becomes exactly `values`, in this order (OCP MRC's EXPLICIT mode):
        each plane's quota is its number of EVs there, every path they name may be
        used, and from now on the set draws no EV of its own. EVs on a denied path are
        DENIED; the others GOOD and active. What was retired is forgotten; packets in
        flight on the EVs left behind are still judged (draining). Returns the EVs."""
        if not values:
            raise EvSetError("an explicit EV array needs at least one EV")
        if len(set(values)) != len(values):
            raise EvSetError("an explicit EV array names an EV twice")
        for value in values:
            if self.path_key(value)[0] >= self.planes:
                raise EvSetError(f"EV {value:#010x} names plane {self.path_key(value)[0]}; "
                                 f"the connection has {self.planes}")
        for ev in (*self.rotation, *(e for spare in self.backups for e in spare)):
            if ev.outstanding and self.usable(ev) and ev not in self.draining:
                self.draining.append(ev)
            ev.active = False
        self.explicit = True
        self.preferred, self.fallback = tuple(range(self.paths_per_plane)), ()
        self.by_ev, self.bad, self.unanswered = {}, {}, []
        self.backups = [[] for _ in range(self.planes)]
        self.rotation = []
        self.quota = [0] * self.planes
        made = []
        for value in values:
            plane, path = self.path_key(value)
            ev = self.by_ev[value] = Ev(value, plane, (plane, path))
            self.quota[plane] += 1
            if ev.key in self.denied:
                ev.state = DENIED
            else:
                ev.active = True
                self.rotation.append(ev)
            made.append(ev)
        self._relive()
        return made

    def due_probes(self, now: float, max_wait: float,
                   bound: float = float("inf")) -> list[BadPath]:
        """Bad paths (on planes that are up) to probe now. A probe unanswered for
        `bound`, or for the path's current wait if that is shorter (by its next turn),
        has failed: probe_failed(), and the path is added to `unanswered` for the caller
        to report. A path is probed when its `probe_at` has come and no probe of it is
        pending; each one returned has a new pending probe, numbered by its `probes`."""
        due = []
        for bad in self.bad.values():
            if not (self.plane_up[bad.key[0]] and bad.evs):
                continue
            if bad.pending is not None:
                if now - bad.pending[1] <= min(bound, bad.wait):
                    continue
                self.probe_failed(bad, max_wait)
                self.unanswered.append(bad)
            if bad.probe_at <= now:
                bad.probes += 1
                bad.pending = (bad.probes, now)
                due.append(bad)
        return due

    def probe_failed(self, bad: BadPath, max_wait: float) -> None:
        """The pending probe failed (unanswered, late or ECN-marked): the count of
        successes starts again and the wait doubles, up to max_wait, from its send. A
        failure after the path's first success marks it lossy (probe_answered())."""
        sent = bad.pending[1] if bad.pending is not None else bad.probe_at
        bad.pending = None
        bad.successes = 0
        if bad.answered:
            bad.lossy = True
        bad.wait = min(bad.wait * 2, max_wait)
        bad.probe_at = sent + bad.wait

    def probe_answered(self, key: PathKey, seq: int, now: float, ok: bool, bound: float,
                       successes: int, spacing: float, max_wait: float,
                       lossy: int | None = None) -> bool | None:
        """A reply to probe `seq` of path `key`: a success if `ok` (no ECN echo) and
        within `bound` of its send (and within the path's current wait), else a
        failure. True when it completes the run of successes in a row the path needs
        (reinstate it now): `successes` while none of its probes has failed since its
        first success (the failures before that were its outage: a healed path), else
        `lossy` (never fewer; None: the same as `successes`), since the path loses
        packets while it answers. None when it answers no pending probe (a late or
        duplicate reply, or a path not bad): it counts for nothing. After a success the
        next probe follows `spacing` later."""
        bad = self.bad.get(key)
        if bad is None or bad.pending is None or bad.pending[0] != seq:
            return None
        if not ok or now - bad.pending[1] > min(bound, bad.wait):
            self.probe_failed(bad, max_wait)
            return False
        bad.pending = None
        if not bad.answered and bad.probes == 1 and not bad.outage:
            # The path answered its very first probe: no outage was seen (its probes
            # failed none, its plane never went down), so what retired it was a loss of
            # a path that carries packets, and it needs the lossy run too (a flap
            # shorter than the first probe's wait pays for that).
            bad.lossy = True
        bad.answered = True
        bad.successes += 1
        if bad.lossy and lossy is not None:
            successes = max(successes, lossy)
        if bad.successes >= successes:
            return True
        bad.probe_at = now + spacing
        return False
