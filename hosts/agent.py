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
    -> {"cmd": "stats"}   <- {"event": "stats", ...counters}
    -> {"cmd": "paths", "dst": 3}   <- {"event": "paths", "peers": {"3": [{"ev": ...,
       "plane": 0, "path": 1, "state": "GOOD", "active": true}, ...]}}   (dst optional)
    -> {"cmd": "route", "kind": "remote-down", "paths": [[3, 0, 1], [2, 0, 1]]}
       what the fabric's routing tells this host (experiments/reroute.py): paths as
       [destination, plane, spine or null] gone or back; the baseline's queue pairs
       follow after the kind's delay (hosts/baseline.py), or after `delay_s` if the
       command gives one (0: routing had converged before the job started); MRC
       takes no notice
    -> {"cmd": "pause", "plane": 2, "on": true}
       PFC at the NIC port of that plane (experiments/pfc.py): the baseline's data waits
       there until a pause with "on": false
    -> {"cmd": "quit"}

A message to send is made from its seed (hosts/payload.py), and a delivered one checked
against it, a chunk at a time between packets: the loop never stalls for milliseconds
while acks wait (a peer would take that for a broken path).

Every protocol event (send bursts, ack, nack, trim, retire, probe, reinstate, plane
changes...) goes to the JSON-lines event log named in the config, with monotonic times
(CLOCK_MONOTONIC is shared by all namespaces, so logs of all hosts line up). Every
`progress_s` the log also gets a `progress` sample (Endpoint.progress(): payload bytes
received in all and per source host, `rx_by_src`), from which experiments/metrics.py
draws goodput and each flow's throughput over time.
Garbage, truncated or foreign datagrams are counted and dropped, never fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import sys
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from hosts.endpoint import Endpoint, make_endpoint
from hosts.netio import CarrierWatcher, PlaneSockets, carrier
from hosts.payload import build, check
from hosts.protocol import ECN_CE, ECN_MASK, MAX_MSG_LEN, MRC_UDP_PORT, transport_spec
from topologies.addressing import AddressingError, host_address, parse_usids
from topologies.model import Fabric
from topologies.paths import path_for_ev
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
    def __init__(self, config: AgentConfig):
        self.config = config
        self.fabric = config.fabric()
        self.me = config.host
        host = self.fabric.host(self.me)
        self.interfaces = [p.intf for p in self.fabric.ports(host.name)]
        self.planes = len(self.interfaces)
        self.log = EventLog(config.events, self.me)
        classes = self.fabric.spec.traffic_classes  # the DSCP of each traffic class
        self.class_of = {code: cls for cls, code in enumerate(classes)}
        self.sockets = PlaneSockets(host_address(self.me), self.interfaces, classes,
                                    transport_spec(config.transport).data_class)
        self.watcher = CarrierWatcher(self.interfaces)
        self.targets: dict[tuple[int, int], tuple[str, int]] = {}  # (dst, EV) -> sockaddr
        self.hosts_by_address: dict[str, int] = {}
        self.counters = {"rx_datagrams": 0, "tx_datagrams": 0, "tx_errors": 0,
                         "foreign": 0, "delivered": 0, "verify_failed": 0}
        self.endpoint: Endpoint = make_endpoint(
            config.transport, self.me, self.fabric, config.protocol,
            on_event=self.log, on_delivered=self.delivered, on_completed=self.completed,
            on_qp_error=self.qp_error)
        # Making and checking messages, a chunk at a time between packets: (steps, then).
        self.jobs: deque[tuple[Generator, Callable]] = deque()
        self.running = True

    # ----------------------------------------------------------------- helpers
    def target_for(self, dst: int, ev: int) -> tuple[str, int]:
        """The socket address of the path an EV names: its uSID address, MRC port."""
        key = (dst, ev)
        target = self.targets.get(key)
        if target is None:
            target = (path_for_ev(self.fabric, self.me, dst, ev).address, MRC_UDP_PORT)
            self.targets[key] = target
        return target

    def host_of(self, address: str) -> int | None:
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

    def emit(self, message: dict) -> None:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    # ----------------------------------------------------------------- callbacks
    def delivered(self, src: int, msg_id: int, data) -> None:
        """Every byte is there: check it (a chunk at a time), then tell the runner."""

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
                stats = dict(self.counters, **self.endpoint.stats())
                self.emit({"event": "stats", **stats})
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
        """Send what the transport has to send now. The hot path of the agent: one
        sendto per packet, on the plane's socket, with a cached socket address; a
        packet of another traffic class than the sockets' carries its own."""
        sent = errors = 0
        socks, targets = self.sockets.socks, self.targets
        default, cmsgs = self.sockets.default, self.sockets.cmsgs
        for plane, dst, ev, data, cls in self.endpoint.poll(now):
            try:
                target = targets.get((dst, ev)) or self.target_for(dst, ev)
                if cls == default:
                    socks[plane].sendto(data, target)
                else:
                    socks[plane].sendmsg([data], cmsgs[cls], 0, target)
                sent += 1
            except OSError:  # port down, buffer full: the transport will notice the loss
                errors += 1
        self.counters["tx_datagrams"] += sent
        self.counters["tx_errors"] += errors

    def run(self) -> int:
        # select(2), not epoll: epoll timeouts are whole milliseconds (Python rounds them
        # up), so a plane whose pacer frees it in 50 us would idle a millisecond, twice
        # the gap between two packets of a 20 Mbit/s plane. select() sleeps to the
        # microsecond, and a host has only a few descriptors.
        selector = selectors.SelectSelector()
        for plane, sock in enumerate(self.sockets.socks):
            selector.register(sock, selectors.EVENT_READ, plane)
        selector.register(self.watcher.sock, selectors.EVENT_READ, "carrier")
        stdin = sys.stdin.buffer
        os.set_blocking(stdin.fileno(), False)
        selector.register(stdin, selectors.EVENT_READ, "control")
        pending = b""
        class_of = self.class_of
        now = time.monotonic()
        for plane, intf in enumerate(self.interfaces):
            if not carrier(intf):
                self.endpoint.set_local_plane(plane, False, now)
        self.emit({"event": "ready", "host": self.me, "planes": self.planes})
        every = self.config.progress_s
        next_progress = now + every
        while self.running:
            now = time.monotonic()
            wake = self.endpoint.next_wakeup(now)
            timeout = max(0.0, min(wake if wake is not None else now + 0.05,
                                   next_progress) - now)
            if self.jobs:
                timeout = 0.0
            for key, _ in selector.select(timeout):
                now = time.monotonic()
                if key.data == "control":
                    chunk = stdin.read(65536)
                    if not chunk:  # the runner went away
                        self.running = False
                        break
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self.command(line.decode(errors="replace"))
                elif key.data == "carrier":
                    for intf, up in self.watcher.events():
                        self.endpoint.set_local_plane(self.interfaces.index(intf), up, now)
                else:
                    for data, address, tclass in self.sockets.receive(key.data):
                        self.counters["rx_datagrams"] += 1
                        src = self.host_of(address)
                        if src is None:
                            self.counters["foreign"] += 1
                            continue
                        if tclass is None:
                            ce, cls = False, None
                        else:
                            ce, cls = tclass & ECN_MASK == ECN_CE, class_of.get(tclass >> 2)
                        self.endpoint.on_datagram(key.data, src, data, ce, now, cls)
            now = time.monotonic()
            self.flush(now)
            if self.jobs:
                self.run_jobs()
            if now >= next_progress:
                next_progress = now + every
                self.log({"t": now, "event": "progress", **self.endpoint.progress()})
        self.log({"t": time.monotonic(), "event": "exit",
                  **dict(self.counters, **self.endpoint.stats())})
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
