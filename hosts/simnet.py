"""An in-process simulated network for the protocol core: virtual clock, seeded chaos.

Each host has a real `Endpoint`; datagrams travel through a model of the fabric instead
of sockets: a fixed delay plus random jitter (reordering), and per packet, with given
probabilities, loss, duplication, trimming (DATA cut to its header, on a fabric hop or
on the last hop) and ECN marking. Like the switches, it goes by the traffic class
alone (hosts/protocol.py CLASS_BEHAVIOUR): it trims only packets of a trimmable class,
into TRIMMED or TRIMMED_LASTHOP; where it would trim the data of `mrc-no-trim` or the
RoCE baseline, it drops it. The chaos may differ per path
(`path_chaos`, keyed by plane and spine). Paths can be black-holed (every path through
a T1, or one plane port of a host, seen by its agent as carrier loss or not; both
directions or only towards one host) from a virtual time on, and back.

With `queues` on, DATA also crosses a model of the fabric's output queues: each T0
uplink to a T1, each T1 downlink to a T0 and each T0 port facing a host is a FIFO
served at its tier's link rate (the topology's `links`), and a packet that joins one
meets what the switches do (hosts/protocol.py, p4src/): CE past
`ecn_threshold_pkts` (never on a port facing a host), trimmed past
`trim_threshold_pkts` if trimmable, dropped at `queue_pkts` otherwise. Control packets
and trimmed headers ride the priority queue and wait for nothing. Each hop is an
event at the time the packet reaches it, so every queue sees its arrivals in time
order (a FIFO of bytes served at the link rate; the queue depth is counted in full-size
frames). With `host_rx_pps` set, each host's agent also takes in at most that many
packets a second, queueing the rest (a software agent falling behind).
One seeded RNG and a virtual clock make every run repeatable. Used by the tests and the
labs; runs tens of thousands of packets a second with no root and no Mininet.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import dataclass, field

from hosts import protocol
from hosts.endpoint import make_endpoint
from hosts.payload import message_bytes, verify
from hosts.protocol import DATA_FRAME_BYTES, frame_bytes
from topologies.model import Fabric
from topologies.paths import path_for_ev

# The stages of a packet's way through the simulated network (SimNet._arrive).
HOP, AGENT, DELIVER = 0, 1, 2


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


class LinkQueue:
    """One output queue of the fabric: a FIFO served at the link's rate (a fluid of
    bytes: `busy_until` is when what has joined so far is sent)."""

    __slots__ = ("bytes_per_s", "ecn", "trim", "capacity", "last_hop", "busy_until",
                 "marked", "max_depth", "frame")

    def __init__(self, rate_mbit: float, ecn: int | None, trim: int, capacity: int,
                 last_hop: bool, frame: int = DATA_FRAME_BYTES):
        self.bytes_per_s = rate_mbit * 1e6 / 8
        self.frame = frame  # a full DATA frame: the unit of the thresholds
        self.ecn, self.trim, self.capacity, self.last_hop = ecn, trim, capacity, last_hop
        self.busy_until = 0.0
        self.marked = 0  # packets CE-marked here
        self.max_depth = 0.0

    def depth(self, t: float) -> float:
        """Full-size DATA frames waiting at time t."""
        return max(0.0, self.busy_until - t) * self.bytes_per_s / self.frame

    def join(self, t: float, size: int) -> float:
        """A frame of `size` bytes joins at t; returns when it has been sent."""
        self.busy_until = max(self.busy_until, t) + size / self.bytes_per_s
        return self.busy_until


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
    queues: bool = False  # model the fabric's output queues (module docstring)
    # Packets a second each host's agent takes in (None: no limit): a software agent
    # that falls behind queues what arrives in its socket buffers, where no switch marks
    # or trims, and every packet (data or control) waits its turn.
    host_rx_pps: float | None = None

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
        self._paths: dict = {}
        self.hosts = []
        for h in self.fabric.hosts:
            self.hosts.append(make_endpoint(
                self.transport, h.index, self.fabric, self.protocol,
                lambda event, host=h.index: self.events.append({**event, "host": host}),
                lambda src, msg_id, data, dst=h.index: self._delivered(src, dst, msg_id, data),
                lambda dst, msg_id, size, src=h.index: self.completed.add((src, dst, msg_id))))
        self._carrier_applied: set[int] = set()
        # The output queues of `queues`, made on first use: ("up", plane, rack, spine),
        # ("down", plane, spine, rack) and ("host", plane, host).
        self.link_queues: dict[tuple, LinkQueue] = {}
        self.rx_busy_until: dict[int, float] = {}  # host -> when its agent is free (host_rx_pps)

    def _delivered(self, src: int, dst: int, msg_id: int, data) -> None:
        self.delivered[(src, dst, msg_id)] = verify(src, dst, msg_id, data)

    def send(self, src: int, dst: int, msg_id: int, size: int) -> None:
        self.hosts[src].send_message(dst, msg_id, message_bytes(src, dst, msg_id, size),
                                     self.now)

    def _transmit(self, src: int, plane: int, dst: int, ev: int, data: bytes, cls: int):
        key = (src, dst, ev)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = path_for_ev(self.fabric, src, dst, ev)
        if data[0] & 0x0F == protocol.DATA:
            self.data_on_path[(path.plane, path.spine)] += 1
        # The switches see the traffic class alone (hosts/protocol.py CLASS_BEHAVIOUR).
        behaviour = protocol.CLASS_BEHAVIOUR[cls]
        queued = behaviour != protocol.BEHAVIOUR_PRIORITY
        if path.plane != plane or any(o.hits(path, self.now) for o in self.outages):
            self.dropped += 1
            return
        chaos, rng = self.path_chaos.get((path.plane, path.spine), self.chaos), self.rng
        if rng.random() < chaos.loss:
            self.dropped += 1
            return
        ce = False
        if queued:
            if rng.random() < chaos.trim:
                if behaviour != protocol.BEHAVIOUR_TRIMMABLE:
                    self.dropped += 1  # a full queue, and the packet asked not to be cut
                    return
                data, cls = _trim(data, rng.random() < chaos.last_hop)
                self.trimmed += 1
                queued = False
            elif rng.random() < chaos.ecn:
                ce = True
        hops = self._hops(path) if self.queues and queued else ()
        copies = 2 if rng.random() < chaos.duplicate else 1
        for _ in range(copies):
            delay = chaos.delay_s + rng.random() * chaos.jitter_s
            if hops:
                self._push(self.now, HOP, (hops, 0, delay, dst, plane, src, data, ce, cls))
            else:
                self._push(self.now + delay, AGENT if self.host_rx_pps else DELIVER,
                           (dst, plane, src, data, ce, cls))

    def _push(self, t: float, stage: int, item: tuple) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, stage, item))

    def _hops(self, path) -> tuple:
        """The output queues a DATA packet of `path` joins, in order."""
        last = ("host", path.plane, path.dst)
        if path.spine is None:
            return (last,)
        src_rack = self.fabric.host(path.src).rack
        dst_rack = self.fabric.host(path.dst).rack
        return (("up", path.plane, src_rack, path.spine),
                ("down", path.plane, path.spine, dst_rack), last)

    def _arrive(self, t: float, stage: int, item: tuple) -> None:
        """One event of a packet's way, at time t, in time order: it reaches its next
        output queue (HOP), the receiving agent's queue (AGENT), or the agent (DELIVER)."""
        if stage == DELIVER:
            dst, plane, src, data, ce, cls = item
            self.hosts[dst].on_datagram(plane, src, data, ce, t, cls)
            return
        if stage == AGENT:
            dst = item[0]
            free = self.rx_busy_until.get(dst, 0.0)
            done = self.rx_busy_until[dst] = max(free, t) + 1 / self.host_rx_pps
            self._push(done, DELIVER, item)
            return
        hops, index, delay, dst, plane, src, data, ce, cls = item
        if index < len(hops):
            queue = self._queue(hops[index])
            depth = queue.depth(t)
            queue.max_depth = max(queue.max_depth, depth)
            trimmable = protocol.CLASS_BEHAVIOUR[cls] == protocol.BEHAVIOUR_TRIMMABLE
            if depth >= queue.trim and trimmable:
                # Cut to its header and sent in the priority queue: it waits no more.
                self.trimmed += 1
                (data, cls), index = _trim(data, queue.last_hop), len(hops)
            elif depth >= queue.capacity:
                self.dropped += 1
                return
            else:
                if queue.ecn is not None and depth >= queue.ecn:
                    ce = True
                    queue.marked += 1
                t = queue.join(t, frame_bytes(len(data)))
                index += 1
            if index < len(hops):
                self._push(t, HOP, (hops, index, delay, dst, plane, src, data, ce, cls))
                return
        # Out of the fabric: the propagation delay and jitter, then the receiving agent.
        self._push(t + delay, AGENT if self.host_rx_pps else DELIVER,
                   (dst, plane, src, data, ce, cls))

    def _queue(self, key: tuple) -> LinkQueue:
        queue = self.link_queues.get(key)
        if queue is None:
            spec = self.fabric.spec
            last_hop = key[0] == "host"
            link = spec.host_t0 if last_hop else spec.t0_t1
            queue = self.link_queues[key] = LinkQueue(
                link.rate_mbit, None if last_hop else spec.ecn_threshold_pkts,
                spec.trim_threshold_pkts, link.queue_pkts, last_hop, spec.data_frame_bytes)
        return queue

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
                for plane, dst, ev, data, cls in endpoint.poll(self.now):
                    self._transmit(index, plane, dst, ev, data, cls)
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
                _, _, stage, item = heapq.heappop(self.queue)
                self._arrive(self.now, stage, item)
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


def _trim(data: bytes, last_hop: bool) -> tuple[bytes, int]:
    """What a trimming switch makes of a DATA packet: its header, in the trimmed class
    (TRIMMED_LASTHOP on a port facing the host)."""
    return (data[:protocol.MRC_HEADER_BYTES],
            protocol.TRIMMED_LASTHOP if last_hop else protocol.TRIMMED)
