"""An in-process simulated network for the protocol core: virtual clock, seeded chaos.

Each host has a real `Endpoint`; datagrams travel through a model of the fabric instead
of sockets: a fixed delay plus random jitter (reordering), and per packet, with given
probabilities, loss, duplication, trimming (DATA cut to its header, on a fabric hop or
on the last hop) and ECN marking. Like the switches, it trims only the DATA of a
transport that marks it trimmable (hosts/protocol.py DATA_DSCP): where it would trim
the data of `mrc-no-trim` or `single-path`, it drops it. The chaos may differ per path
(`path_chaos`, keyed by plane and spine). Paths can be black-holed (every path through
a T1, or one plane port of a host, seen by its agent as carrier loss or not; both
directions or only towards one host) from a virtual time on, and back.
One seeded RNG and a virtual clock make every run repeatable. Used by the tests and the
labs; runs tens of thousands of packets a second with no root and no Mininet.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import dataclass, field

from hosts import protocol, wire
from hosts.endpoint import make_endpoint
from hosts.payload import message_bytes, verify
from topologies.model import Fabric
from topologies.paths import path_for_ev


@dataclass
class Chaos:
    delay_s: float = 0.0005
    jitter_s: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    trim: float = 0.0
    ecn: float = 0.0
    last_hop: float = 0.0  # fraction of trims that happen on the port facing the receiver


@dataclass
class Outage:
    """Paths through T1 `spine` of `plane` (or, with host set, that host's plane port)
    drop everything between `start` and `end`; with `to_host` set, only what travels
    towards that host (a one-way fault: the other direction keeps working)."""

    plane: int
    spine: int | None = None
    host: int | None = None
    start: float = 0.0
    end: float = float("inf")
    local_carrier: bool = False  # a host port going down is seen by its agent
    to_host: int | None = None

    def hits(self, path, now: float) -> bool:
        if not self.start <= now < self.end or path.plane != self.plane:
            return False
        if self.to_host is not None and path.dst != self.to_host:
            return False
        if self.host is not None:
            return self.host in (path.src, path.dst)
        return path.spine == self.spine


@dataclass
class SimNet:
    fabric: Fabric
    transport: str = "mrc"
    chaos: Chaos = field(default_factory=Chaos)
    outages: list[Outage] = field(default_factory=list)
    seed: int = 1
    protocol: dict = field(default_factory=dict)
    # Chaos of particular paths, by (plane, spine); spine None is the direct same-rack path.
    path_chaos: dict[tuple[int, int | None], Chaos] = field(default_factory=dict)

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        self.now = 0.0
        self.queue: list = []
        self.seq = 0
        self.events: list[dict] = []
        self.delivered: dict[tuple[int, int, int], bool] = {}
        self.completed: set[tuple[int, int, int]] = set()
        self.dropped = 0
        self.trimmed = 0
        # DATA packets put on each path, by (plane, spine): what tests count to see
        # which paths a transport really uses.
        self.data_on_path: Counter[tuple[int, int | None]] = Counter()
        self.trimmable = protocol.trimmable(self.transport)
        self._paths: dict = {}
        self.hosts = []
        for h in self.fabric.hosts:
            self.hosts.append(make_endpoint(
                self.transport, h.index, self.fabric, self.protocol,
                lambda event, host=h.index: self.events.append({**event, "host": host}),
                lambda src, msg_id, data, dst=h.index: self._delivered(src, dst, msg_id, data),
                lambda dst, msg_id, size, src=h.index: self.completed.add((src, dst, msg_id))))
        self._carrier_applied: set[int] = set()

    def _delivered(self, src: int, dst: int, msg_id: int, data) -> None:
        self.delivered[(src, dst, msg_id)] = verify(src, dst, msg_id, data)

    def send(self, src: int, dst: int, msg_id: int, size: int) -> None:
        self.hosts[src].send_message(dst, msg_id, message_bytes(src, dst, msg_id, size),
                                     self.now)

    def _transmit(self, src: int, plane: int, dst: int, ev: int, data: bytes, is_data: bool):
        key = (src, dst, ev)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = path_for_ev(self.fabric, src, dst, ev)
        if is_data:
            self.data_on_path[(path.plane, path.spine)] += 1
        if path.plane != plane or any(o.hits(path, self.now) for o in self.outages):
            self.dropped += 1
            return
        chaos, rng = self.path_chaos.get((path.plane, path.spine), self.chaos), self.rng
        if rng.random() < chaos.loss:
            self.dropped += 1
            return
        ce = False
        if is_data and not data[1] & protocol.F_TRIMMED:
            if rng.random() < chaos.trim:
                if not self.trimmable:
                    self.dropped += 1  # a full queue, and the packet asked not to be cut
                    return
                data = wire.trim(data, rng.random() < chaos.last_hop)
                self.trimmed += 1
            elif rng.random() < chaos.ecn:
                ce = True
        copies = 2 if rng.random() < chaos.duplicate else 1
        for _ in range(copies):
            t = self.now + chaos.delay_s + rng.random() * chaos.jitter_s
            self.seq += 1
            heapq.heappush(self.queue, (t, self.seq, dst, plane, src, data, ce))

    def _carrier(self) -> None:
        for i, outage in enumerate(self.outages):
            if outage.host is None or not outage.local_carrier:
                continue
            down = outage.start <= self.now < outage.end
            if down != (i in self._carrier_applied):
                (self._carrier_applied.add if down else self._carrier_applied.discard)(i)
                self.hosts[outage.host].set_local_plane(outage.plane, not down, self.now)

    def run(self, until: float, done=None) -> float:
        """Advance virtual time until `until` or until done() is true; returns the time."""
        while self.now < until:
            self._carrier()
            for index, endpoint in enumerate(self.hosts):
                for plane, dst, ev, data, is_data in endpoint.poll(self.now):
                    self._transmit(index, plane, dst, ev, data, is_data)
            if done is not None and done():
                break
            wakes = [w for w in (e.next_wakeup(self.now) for e in self.hosts) if w is not None]
            if self.queue:
                wakes.append(self.queue[0][0])
            wakes += [t for o in self.outages for t in (o.start, o.end) if t > self.now]
            if not wakes:
                break
            self.now = min(max(min(wakes), self.now + 1e-6), until)  # never past `until`
            while self.queue and self.queue[0][0] <= self.now:
                _, _, dst, plane, src, data, ce = heapq.heappop(self.queue)
                self.hosts[dst].on_datagram(plane, src, data, ce, self.now)
        return self.now

    def all_done(self, transfers) -> bool:
        return all(self.delivered.get(t) and t in self.completed for t in transfers)

    def stats(self) -> dict:
        """Network counters and the sum of every endpoint's counters."""
        total = {"now": self.now, "dropped": self.dropped, "trimmed": self.trimmed}
        for endpoint in self.hosts:
            for key, value in endpoint.stats().items():
                total[key] = total.get(key, 0) + value
        return total
