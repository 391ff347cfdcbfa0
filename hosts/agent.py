"""The host agent process: `python3 -m hosts.agent --config <per-host JSON>`.

It runs inside a host's namespace, one UDP socket per plane interface, and moves real
messages with a transport (`mrc`, its variants, or the RoCE-like baseline) whose protocol logic
lives in pure modules (hosts/endpoint.py and below). The event loop waits on the plane
sockets, rtnetlink carrier events, the control channel and the transport's next timer.

Control channel: JSON lines on stdin (commands) and stdout (answers and notifications):

    -> {"cmd": "send", "dst": 3, "msg_id": 0, "bytes": 1000000}
    <- {"event": "completed", "dst": 3, "msg_id": 0, "bytes": ..., "t": ...}   (all acked)
    <- {"event": "delivered", "src": 1, "msg_id": 0, "bytes": ..., "verified": true, "t": ...}
    <- {"event": "qp_error", "dst": 3, "qp": 2, "t": ...}   (a RoCE QP past its retry limit)
    -> {"cmd": "stats"}   <- {"event": "stats", ...counters, "paths_in_use": {"3": 128}}
    -> {"cmd": "paths", "dst": 3}   <- {"event": "paths", "peers": {"3": [{"ev": ...,
       "plane": 0, "path": 1, "state": "GOOD", "active": true}, ...]}}   (dst optional)
    -> {"cmd": "route", "kind": "remote-down", "paths": [[3, 0, 1], [2, 0, 1]]}
       what the fabric's routing tells this host (experiments/dataplanes/reroute.py): paths as
       [destination, plane, spine or null] gone or back; the baseline's queue pairs
       follow after the kind's delay (hosts/baseline.py), or after `delay_s` if the
       command gives one (0: routing had converged before the job started); MRC
       takes no notice
    -> {"cmd": "pause", "plane": 2, "on": true}
       PFC at the NIC port of that plane (experiments/dataplanes/pfc.py): the baseline's data waits
       there until a pause with "on": false
    -> {"cmd": "line-rate", "share": 0.875}
       the NIC's ports run at that share of their line rate from now on (a rate cut of
       the host's link on the single-plane twin): every sender paces to it
    -> {"cmd": "query_ev_profile", "dst": 3}, {"cmd": "modify_ev_profile", ...},
       {"cmd": "ep_batch_send_wait", ...}: the control API, shaped as OCP MRC's
       mrc_ctl.h (EV profiles and states, the denylist, EV probes; `ev_event` lines
       once an event mask is set): hosts/mrc_ctl.py
    -> {"cmd": "quit"}

A message to send is made from its seed (hosts/payload.py), and a delivered one checked
against it, a chunk at a time between packets: the loop never stalls for milliseconds
while acks wait (a peer would take that for a broken path).

Every protocol event (send bursts, ack, nack, trim, retire, probe, reinstate, plane
changes...) goes to the JSON-lines event log named in the config, with monotonic times
(CLOCK_MONOTONIC is shared by all namespaces, so logs of all hosts line up). Every
`progress_s` the log also gets a `progress` sample (Endpoint.progress(): payload bytes
received in all and per source host, `rx_by_src`), from which experiments/analysis/metrics.py
draws goodput and each flow's throughput over time.
Garbage, truncated or foreign datagrams are counted and dropped, never fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import sys
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import cached_property

from hosts.endpoint import Endpoint, make_endpoint
from hosts.looplag import LoopLag
from hosts.mrc_ctl import COMMANDS as CTL_COMMANDS
from hosts.mrc_ctl import MrcCtl
from hosts.netio import CarrierWatcher, PlaneSockets, parse_source_key
from hosts.payload import build, check
from hosts.protocol import (
    ECN_CE,
    ECN_MASK,
    MAX_MSG_LEN,
    MRC_HEADER_BYTES,
    MRC_UDP_PORT,
    ev_plane,
    transport_spec,
)
from topologies.addressing import AddressingError, host_address, parse_usids
from topologies.model import Fabric
from topologies.paths import choices_per_plane, path_for_ev, path_index
from topologies.resolved import read_fabric

# Time the loop gives to making and checking messages per turn: a chunk or two, so
# packets and acks wait at most about this long behind them.
JOB_BUDGET_S = 0.0005


@dataclass
class AgentConfig:
    host: int
    # The run's resolved topology (topology.json, topologies/resolved.py): the fabric
    # the run built, at the rates it capped the links to, or the single-plane twin, so
    # that the agent paces, and sets its timers, for the links it really has.
    topology: str
    transport: str = "mrc"
    events: str = ""
    protocol: dict = field(default_factory=dict)
    progress_s: float = 0.05  # how often the event log gets a progress sample

    def fabric(self) -> Fabric:
        """The fabric of the run, as the run wrote it."""
        return read_fabric(self.topology)

    @classmethod
    def load(cls, path: str) -> AgentConfig:
        with open(path) as f:
            data = json.load(f)
        return cls(**data)


class EventLog:
    """JSON lines, buffered; flushed on progress ticks and at exit."""

    def __init__(self, path: str, host: int):
        self.file = open(path, "w", buffering=1 << 16) if path else None
        self.host = host

    def __call__(self, event: dict) -> None:
        if self.file:
            event.setdefault("host", self.host)
            self.file.write(json.dumps(event, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self.file:
            self.file.close()


class Agent:
    """One host's agent. `sockets` and `watcher` default to the host's plane interfaces
    (PlaneSockets.on_interfaces, CarrierWatcher); a harness may hand in others, with
    `address_of` and `host_of` mapping paths and sources to them
    (bench/agent_loopback.py runs agents on the loopback this way)."""

    def __init__(self, config: AgentConfig, sockets: PlaneSockets | None = None,
                 watcher: CarrierWatcher | None = None):
        self.config = config
        self.fabric = config.fabric()
        self.me = config.host
        host = self.fabric.host(self.me)
        self.interfaces = [p.intf for p in self.fabric.ports(host.name)]
        self.planes = len(self.interfaces)
        self.log = EventLog(config.events, self.me)
        self.counters = {"rx_datagrams": 0, "tx_datagrams": 0, "tx_errors": 0,
                         "foreign": 0, "delivered": 0, "verify_failed": 0}
        self.endpoint: Endpoint = make_endpoint(
            config.transport, self.me, self.fabric, config.protocol,
            on_event=self.log, on_delivered=self.delivered, on_completed=self.completed,
            on_qp_error=self.qp_error)
        classes = self.fabric.spec.traffic_classes  # the DSCP of each traffic class
        # (CE mark, traffic class) of each IPv6 traffic class byte; the last entry for a
        # datagram without one. A DSCP the topology does not name has class None.
        class_of = {code: cls for cls, code in enumerate(classes)}
        self.tclass_table = [(t & ECN_MASK == ECN_CE, class_of.get(t >> 2))
                             for t in range(256)] + [(False, None)]
        # Receive slots hold the largest datagram this run's packets can be.
        largest = MRC_HEADER_BYTES + self.endpoint.config.mtu_payload
        self.sockets = sockets or PlaneSockets.on_interfaces(
            host_address(self.me), self.interfaces, classes,
            transport_spec(config.transport).data_class, max_datagram=largest)
        self.watcher = watcher or CarrierWatcher(self.interfaces)
        # (dst, plane, path index) -> destination; dst -> paths per plane to it
        self.targets: dict[tuple[int, int, int], object] = {}
        self.path_counts: dict[int, int] = {}
        self.sources: dict[bytes, int | None] = {}  # source key -> host (None: foreign)
        self.hosts_by_address: dict[str, int] = {}
        self.lag = LoopLag()
        # Making and checking messages, a chunk at a time between packets: (steps, then).
        self.jobs: deque[tuple[Generator, Callable]] = deque()
        self.running = True

    # ----------------------------------------------------------------- helpers
    def address_of(self, dst: int, ev: int) -> tuple[str, int]:
        """The socket address of the path an EV names: its uSID address, MRC port."""
        return path_for_ev(self.fabric, self.me, dst, ev).address, MRC_UDP_PORT

    def target_for(self, dst: int, ev: int):
        """The prepared destination (PlaneSockets.sockaddr) of the path an EV names,
        made once per path: a connection draws many EVs for each of its paths."""
        paths = self.path_counts.get(dst)
        if paths is None:
            paths = self.path_counts[dst] = choices_per_plane(self.fabric, self.me, dst)
        key = (dst, ev_plane(ev), path_index(ev, paths))
        target = self.targets.get(key)
        if target is None:
            target = self.targets[key] = self.sockets.sockaddr(*self.address_of(dst, ev))
        return target

    def host_of(self, address: str, port: int = MRC_UDP_PORT) -> int | None:
        host = self.hosts_by_address.get(address)
        if host is None:
            try:
                usids = parse_usids(address)
            except (AddressingError, ValueError):
                return None
            if len(usids) != 1 or not usids[0] & 0x8000:
                return None
            host = usids[0] & 0x7FFF
            if host >= len(self.fabric.hosts) or host == self.me:
                return None
            self.hosts_by_address[address] = host
        return host

    def source_host(self, key: bytes) -> int | None:
        """The host a datagram came from, by its source key (PlaneSockets.receive);
        None for anything that is not a peer host."""
        if key not in self.sources:
            self.sources[key] = self.host_of(*parse_source_key(key))
        return self.sources[key]

    def emit(self, message: dict) -> None:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    # ----------------------------------------------------------------- callbacks
    def delivered(self, src: int, msg_id: int, data) -> None:
        """Every byte is there: check it (a chunk at a time), then tell the runner."""
        # A progress sample now, besides the periodic ones: a flow's curve then ends at
        # its last byte, where the run may stop before the next periodic sample (the
        # flow's throughput series lost its last tenth of a second).
        self.log({"t": time.monotonic(), "event": "progress", **self.endpoint.progress()})

        def then(ok: bool) -> None:
            self.counters["delivered"] += 1
            if not ok:
                self.counters["verify_failed"] += 1
            self.emit({"event": "delivered", "src": src, "msg_id": msg_id,
                       "bytes": len(data), "verified": ok, "t": time.monotonic()})

        self.jobs.append((check(src, self.me, msg_id, data), then))

    def completed(self, dst: int, msg_id: int, size: int) -> None:
        self.emit({"event": "completed", "dst": dst, "msg_id": msg_id, "bytes": size,
                   "t": time.monotonic()})

    def qp_error(self, dst: int, qp: int, now: float) -> None:
        """A baseline queue pair passed its retry limit: a job would abort here."""
        self.emit({"event": "qp_error", "dst": dst, "qp": qp, "t": now})

    # ----------------------------------------------------------------- control
    @cached_property
    def ctl(self) -> MrcCtl:
        """The control API (hosts/mrc_ctl.py), made at its first command."""
        return MrcCtl(self.endpoint, self.emit)

    def command(self, line: str) -> None:
        try:
            cmd = json.loads(line)
            kind = cmd["cmd"]
            if kind == "send":
                dst, msg_id, size = int(cmd["dst"]), int(cmd["msg_id"]), int(cmd["bytes"])
                if dst == self.me or not 0 <= dst < len(self.fabric.hosts):
                    raise ValueError(f"no peer host {dst}")
                if not 0 <= size <= MAX_MSG_LEN:
                    raise ValueError(f"message size {size} is not 0..{MAX_MSG_LEN}")
                self.jobs.append((build(self.me, dst, msg_id, size), lambda data: self.send(
                    dst, msg_id, data)))
            elif kind == "stats":
                self.emit({"event": "stats", **self.stats()})
            elif kind == "paths":
                dst = cmd.get("dst")
                states = self.endpoint.path_states(None if dst is None else int(dst))
                self.emit({"event": "paths",
                           "peers": {str(peer): evs for peer, evs in states.items()}})
            elif kind == "route":
                paths = [(int(dst), int(plane), None if spine is None else int(spine))
                         for dst, plane, spine in cmd["paths"]]
                delay = cmd.get("delay_s")
                self.endpoint.route_event(str(cmd["kind"]), paths, time.monotonic(),
                                          None if delay is None else float(delay))
            elif kind == "pause":
                plane = int(cmd["plane"])
                if not 0 <= plane < self.planes:
                    raise ValueError(f"no plane {plane}")
                self.endpoint.pause(plane, bool(cmd["on"]), time.monotonic())
            elif kind == "line-rate":
                self.endpoint.set_line_share(float(cmd["share"]))
            elif kind in CTL_COMMANDS:
                self.ctl.command(cmd, time.monotonic())  # answers, errors included
            elif kind == "quit":
                self.running = False
            else:
                raise ValueError(f"unknown command {kind!r}")
        except (ValueError, KeyError, TypeError) as err:
            self.emit({"event": "error", "message": f"bad command {line.strip()!r}: {err}"})

    def send(self, dst: int, msg_id: int, data: bytes) -> None:
        try:
            self.endpoint.send_message(dst, msg_id, data, time.monotonic())
        except ValueError as err:
            self.emit({"event": "error", "message": f"send to {dst}: {err}"})

    def stats(self) -> dict:
        """The agent's counters, its endpoint's, its event loop's lag (`event_loop`:
        hosts/looplag.py), the CPU time its process used so far (`cpu_s`), the most
        memory it held (`max_rss_mb`) and, per peer it sends to, the distinct paths
        the connection sprays over now (`paths_in_use`: Endpoint.paths_in_use)."""
        return dict(self.counters, truncated=self.sockets.truncated,
                    **self.endpoint.stats(), cpu_s=round(time.process_time(), 3),
                    max_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                     / 1024, 1),
                    event_loop=self.lag.summary(),
                    paths_in_use={str(peer): n
                                  for peer, n in self.endpoint.paths_in_use().items()})

    # ----------------------------------------------------------------- loop
    def run_jobs(self, budget_s: float = JOB_BUDGET_S) -> None:
        """Steps of the pending jobs, for at most about `budget_s`."""
        end = time.monotonic() + budget_s
        jobs = self.jobs
        while jobs:
            steps, then = jobs[0]
            try:
                next(steps)
            except StopIteration as done:
                jobs.popleft()
                then(done.value)
            if time.monotonic() >= end:
                return

    def flush(self, now: float) -> None:
        """Send what the transport has to send now: the hot path of the agent. Packets
        go out in one batch per plane socket (PlaneSockets.send), each to the cached
        destination of its path, with its traffic class."""
        out = self.endpoint.poll(now)
        if not out:
            return
        target_for = self.target_for
        batches: list[list] = [[] for _ in range(self.planes)]
        for plane, dst, ev, data, cls in out:
            batches[plane].append((target_for(dst, ev), data, cls))
        sent = errors = 0
        for plane, batch in enumerate(batches):
            if batch:
                ok, failed = self.sockets.send(plane, batch)
                sent += ok
                errors += failed  # port down, buffer full: the transport will notice
        self.counters["tx_datagrams"] += sent
        self.counters["tx_errors"] += errors

    def receive(self, plane: int, now: float) -> None:
        """Hand every datagram queued on `plane` to the transport, in one pass: its
        source host from the source key, CE mark and traffic class from one table."""
        datagrams = self.sockets.receive(plane)
        self.counters["rx_datagrams"] += len(datagrams)
        sources, table = self.sources, self.tclass_table
        on_datagram = self.endpoint.on_datagram
        for data, key, tclass in datagrams:
            src = sources.get(key)
            if src is None:
                src = self.source_host(key)
                if src is None:
                    self.counters["foreign"] += 1
                    continue
            ce, cls = table[256 if tclass is None else tclass & 0xFF]
            on_datagram(plane, src, data, ce, now, cls)

    def run(self) -> int:
        # select(2), not epoll: epoll timeouts are whole milliseconds (Python rounds them
        # up), so a plane whose pacer frees it in 50 us would idle a millisecond, twice
        # the gap between two packets of a 20 Mbit/s plane. select() sleeps to the
        # microsecond, and a host has only a few descriptors.
        roles: dict[int, object] = {fd: plane for plane, fd in enumerate(self.sockets.fds)}
        roles[self.watcher.fileno()] = "carrier"
        stdin = sys.stdin.buffer
        os.set_blocking(stdin.fileno(), False)
        roles[stdin.fileno()] = "control"
        fds = list(roles)
        pending = b""
        now = time.monotonic()
        for plane, intf in enumerate(self.interfaces):
            if not self.watcher.has_carrier(intf):
                self.endpoint.set_local_plane(plane, False, now)
        self.emit({"event": "ready", "host": self.me, "planes": self.planes})
        every = self.config.progress_s
        next_progress = now + every
        lag, turn = self.lag.lag.add, self.lag.turn.add
        endpoint, monotonic = self.endpoint, time.monotonic
        woke = monotonic()
        while self.running:
            now = monotonic()
            turn(now - woke)
            wake = endpoint.next_wakeup(now)
            deadline = min(wake if wake is not None else now + 0.05, next_progress)
            timeout = 0.0 if self.jobs else max(0.0, deadline - now)
            readable = select.select(fds, (), (), timeout)[0]
            now = woke = monotonic()
            if timeout and now >= deadline and deadline != next_progress:
                lag(now - deadline)  # slept past a timer: the machine woke us late
            for fd in readable:
                role = roles[fd]
                if role.__class__ is int:
                    self.receive(role, now)
                elif role == "control":
                    chunk = stdin.read(65536)
                    if not chunk:  # the runner went away
                        self.running = False
                        break
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self.command(line.decode(errors="replace"))
                else:
                    for intf, up in self.watcher.events():
                        endpoint.set_local_plane(self.interfaces.index(intf), up, now)
            now = monotonic()
            self.flush(now)
            if self.jobs:
                self.run_jobs()
            if now >= next_progress:
                lag(now - next_progress)  # the progress tick: late by the loop's work too
                next_progress = now + every
                self.log({"t": now, "event": "progress", **endpoint.progress()})
        self.log({"t": time.monotonic(), "event": "exit", **self.stats()})
        self.log.close()
        self.sockets.close()
        self.watcher.close()
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hosts.agent")
    parser.add_argument("--config", required=True, help="per-host agent JSON")
    parser.add_argument("--profile", help="write a cProfile of the run to this file")
    args = parser.parse_args(argv)
    try:
        config = AgentConfig.load(args.config)
        agent = Agent(config)
    except (OSError, ValueError, TypeError, KeyError) as err:
        print(json.dumps({"event": "error", "message": f"agent start failed: {err}"}),
              flush=True)
        return 2
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        try:
            return profiler.runcall(agent.run)
        finally:
            profiler.dump_stats(args.profile)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
