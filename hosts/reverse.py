"""The reverse EV set of one peer: the EVs this host sends its control packets on.

Faults can be one-way. An answer (SACK, NACK, PROBE_REPLY) that always took the
mirror of the data path it answers would die on a path whose forward direction works
and whose reverse is dead; the peer would retire the healthy forward path, and keep it
retired, since the replies to its probes would die the same way. The paper (section
2.4, "Reverse Paths") keeps a small reverse EV set, at least one EV per plane, known to
work in this direction. So does this module:

- when this host also sends data to the peer, every SACK for it confirms the EV the
  data went on (it crossed towards the peer and was answered);
- otherwise, while data from the peer keeps arriving (from one `reverse_probe_s` after
  the first), one EV probe per plane and `reverse_probe_s`, on an EV drawn at random:
  its PROBE_REPLY confirms it (a same-rack peer's EV names the direct path, which is
  all the data takes). As in the paper, a connection that sends probes nothing, even
  on a plane its SACKs have not confirmed lately (at a low rate shared by many peers a
  plane carries a pair's packet only every few round trips): only a plane with a
  suspect path is probed then.

Answers to data take the mirror of their data path by default (so an answer is lost
only where its data path failed, and one dead spine never takes the answers of the
plane's other paths with it), except on a path the peer has shown it believes dead: a
PROBE arriving on it (the forward direction works, so its reverse is suspect). Such a
path's answers, and every PROBE_REPLY, go on the plane's confirmed reverse EV; a
confirmation of an EV on the suspect path itself clears it. Pure logic: the endpoint
(hosts/endpoint.py) sends the probes and picks the EVs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hosts.protocol import EV_CHOICE_MASK, make_ev
from topologies.paths import path_index

_NEVER_SKIP = float("-inf")


class ReverseEvs:
    __slots__ = ("planes", "paths", "rng", "evs", "confirmed_at", "next_probe", "pending",
                 "inbound_at", "outbound_at", "interval", "suspect_paths", "choices",
                 "soonest", "next_at")

    def __init__(self, planes: int, paths: int, interval: float, rng: random.Random,
                 choices: Sequence[int] | None = None):
        self.planes, self.paths, self.rng, self.interval = planes, max(1, paths), rng, interval
        # The path indices within a plane its probes may take (None: any).
        self.choices = None if choices is None else tuple(choices)
        self.evs: list[int | None] = [None] * planes  # the plane's confirmed EV, if any
        self.confirmed_at = [float("-inf")] * planes
        self.next_probe = [0.0] * planes
        self.pending: set[int] = set()  # EVs probed and not answered yet
        self.inbound_at = float("-inf")  # when data from the peer last arrived
        self.outbound_at = float("-inf")  # when a SACK last answered our data
        # Paths (per plane) whose reverse direction is suspect: answers avoid them.
        self.suspect_paths: list[set[int]] = [set() for _ in range(planes)]
        self._reschedule()

    def _reschedule(self) -> None:
        """After any change of next_probe or confirmed_at: `soonest` is stale, and
        `next_at` (before which the endpoint skips due_probes()) lets the next poll
        look. Recomputed lazily (`_soon()`): a confirmation comes with every SACK."""
        self.soonest = None
        self.next_at = float("-inf")

    def _soon(self) -> float:
        """The soonest a plane's probe can fall due; `next_at` a hair earlier, so that
        rounding never skips a probe due_probes() would send."""
        soonest = self.soonest
        if soonest is None:
            interval = self.interval
            soonest = self.soonest = min(
                max(probe, confirmed + interval)
                for probe, confirmed in zip(self.next_probe, self.confirmed_at))
            self.next_at = soonest - 1e-9
        return soonest

    def path(self, ev: int) -> int:
        return path_index(ev, self.paths)

    def answer_ev(self, plane: int, mirror: int) -> int:
        """The EV an answer to data that came on `mirror` goes on: the mirror, unless
        its path is suspect and the plane has a confirmed EV elsewhere."""
        suspect = self.suspect_paths[plane]
        if self.path(mirror) in suspect:
            ev = self.evs[plane]
            if ev is not None and self.path(ev) not in suspect:
                return ev
        return mirror

    def reply_evs(self, plane: int, mirror: int) -> list[int]:
        """The EVs a PROBE_REPLY goes on: the mirror of the probed path and the plane's
        confirmed EV, if it takes another path. Either may be the one that works (the
        probed path's reverse may be dead; the confirmed EV may have died since), and
        probes are rare enough to answer twice."""
        ev = self.evs[plane]
        if ev is None or self.path(ev) == self.path(mirror):
            return [mirror]
        return [mirror, ev]

    def confirm(self, plane: int, ev: int, now: float) -> None:
        """A SACK answered our data, sent on `ev`: the connection sends, and `ev` carries
        packets to the peer now."""
        self.outbound_at = now
        self._confirmed(plane, ev, now)

    def _confirmed(self, plane: int, ev: int, now: float) -> None:
        """`ev` is known to carry packets to the peer now."""
        self.evs[plane] = ev
        self.confirmed_at[plane] = now
        if self.pending:
            self.pending.discard(ev)
        suspect = self.suspect_paths[plane]
        if suspect:
            suspect.discard(path_index(ev, self.paths))
        self.soonest = None
        self.next_at = _NEVER_SKIP

    def on_probe_reply(self, plane: int, ev: int, now: float) -> bool:
        """A PROBE_REPLY: True if it answered one of this set's probes."""
        if ev not in self.pending:
            return False
        self._confirmed(plane, ev, now)
        return True

    def inbound(self, now: float) -> None:
        if self.inbound_at == float("-inf"):
            # The first probes wait an interval: a connection shorter than that does
            # well on the mirrors, and needs no probes at all.
            self.next_probe = [self._grid(now)] * self.planes
            self._reschedule()
        self.inbound_at = now

    def _grid(self, now: float) -> float:
        # On a grid of the interval: the probes of every peer and plane fall due
        # together, so they cost the event loop one wake-up, not one each.
        return (now // self.interval + 1) * self.interval

    def suspect(self, plane: int, ev: int, now: float) -> None:
        """The peer probed `ev`'s path: it arrived, so the forward direction works and
        the peer believes the path dead: its reverse direction is suspect. The plane
        is probed now (at most once per interval) for a confirmed reverse EV."""
        self.suspect_paths[plane].add(self.path(ev))
        self.next_probe[plane] = min(self.next_probe[plane], now)
        self.confirmed_at[plane] = float("-inf")  # probe the plane now, confirmed or not
        self.inbound_at = max(self.inbound_at, now)
        self._reschedule()

    def due_probes(self, now: float) -> list[int]:
        """EVs to probe now: one per plane not confirmed within the interval, while
        data from the peer arrived within it, if no SACK answered our data within it
        either (the connection only receives) or the plane has a suspect path."""
        if now - self.inbound_at > self.interval:
            self._soon()
            return []
        due = []
        sending = now - self.outbound_at < self.interval
        deferred = False
        for plane in range(self.planes):
            if now < self.next_probe[plane] or now - self.confirmed_at[plane] < self.interval:
                continue
            self.next_probe[plane] = self._grid(now)
            if sending and not self.suspect_paths[plane]:
                deferred = True  # the connection sends: its SACKs keep the set current
                continue
            ev = self._random_ev(plane)
            self.pending.add(ev)
            due.append(ev)
        if len(self.pending) > 4 * self.planes:  # unanswered probes are forgotten
            self.pending = set(due)
        if due or deferred:
            self._reschedule()
        self._soon()
        return due

    def next_due(self, now: float) -> float | None:
        """When a probe falls due next, if one can (for the event loop's timeout)."""
        if now - self.inbound_at > self.interval:
            return None
        soonest = self._soon()
        return soonest if soonest <= self.inbound_at + self.interval else None

    def _random_ev(self, plane: int) -> int:
        if self.choices is None:
            return make_ev(plane, self.rng.randrange(EV_CHOICE_MASK + 1))
        # Random choice bits that name one of the allowed paths (choice modulo paths).
        slots = (EV_CHOICE_MASK + 1) // self.paths
        return make_ev(plane, self.rng.randrange(slots) * self.paths
                       + self.rng.choice(self.choices))
