"""The host agent process: `python3 -m hosts.agent --config <per-host JSON> [--netns
<path>] ...`.

An agent serves one host: one UDP socket per plane interface of the host's namespace,
and a transport (`mrc`, its variants, or the RoCE-like baseline) whose protocol logic
lives in pure modules (hosts/endpoint.py and below) moving real messages. A process
runs one agent inside its host's namespace, or several (one --config and --netns per
host), each agent's sockets opened in its own host's namespace (topologies/netns.py): a
socket stays in the namespace it was made in. One event loop (`serve`) waits on every
agent's plane sockets and rtnetlink carrier events, the control channel and the soonest
of the transports' timers; a process per core instead of one per host spares the
machine a process's wake-ups and scheduling per host (experiments/run/agents.py).

Control channel: JSON lines on stdin (commands) and stdout (answers and notifications).
Every line out names its host (`agent`); a process serving several hosts takes a
`host` in every command:

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
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cache, cached_property

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
from topologies import netns
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
        """The fabric of the run, as the run wrote it: read once per process, however
        many of its hosts the process serves (a Fabric never changes)."""
        return _fabric_at(self.topology)

    @classmethod
    def load(cls, path: str) -> AgentConfig:
        with open(path) as f:
            data = json.load(f)
        return cls(**data)


@cache
def _fabric_at(topology: str) -> Fabric:
    return read_fabric(topology)


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
                 watcher: CarrierWatcher | None = None, lag: LoopLag | None = None):
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
        self.lag = lag or LoopLag()  # the loop's: shared by the agents of one process
        self.process_hosts = 1  # hosts the process serves (serve() sets it)
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
        """A line to the runner, naming this agent's host (one process may serve many)."""
        sys.stdout.write(json.dumps({**message, "agent": self.me}, separators=(",", ":"))
                         + "\n")
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
        """One control line (module docstring)."""
        try:
            cmd = json.loads(line)
        except ValueError as err:
            self.refuse(line, err)
            return
        self.obey(cmd, line)

    def refuse(self, line: str, err: Exception) -> None:
        """Tell the runner a control line could not be carried out, and why."""
        self.emit({"event": "error", "message": f"bad command {line.strip()!r}: {err}"})

    def obey(self, cmd: dict, line: str) -> None:
        """One parsed control command; `line` names it in an error."""
        try:
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
            self.refuse(line, err)

    def send(self, dst: int, msg_id: int, data: bytes) -> None:
        try:
            self.endpoint.send_message(dst, msg_id, data, time.monotonic())
        except ValueError as err:
            self.emit({"event": "error", "message": f"send to {dst}: {err}"})

    def stats(self) -> dict:
        """The agent's counters, its endpoint's, its event loop's lag (`event_loop`:
        hosts/looplag.py), its share of the CPU time its process used so far (`cpu_s`:
        split evenly over the `process_hosts` hosts the process serves, so that the
        hosts' figures add up to the processes'), the most memory the process held
        (`max_rss_mb`) and, per peer it sends to, the distinct paths the connection
        sprays over now (`paths_in_use`: Endpoint.paths_in_use)."""
        return dict(self.counters, truncated=self.sockets.truncated,
                    **self.endpoint.stats(),
                    cpu_s=round(time.process_time() / self.process_hosts, 4),
                    process_hosts=self.process_hosts,
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

    def start(self, now: float) -> None:
        """Before the loop's first turn: the planes whose port has no carrier are down,
        and the runner hears the agent is ready."""
        for plane, intf in enumerate(self.interfaces):
            if not self.watcher.has_carrier(intf):
                self.endpoint.set_local_plane(plane, False, now)
        self.emit({"event": "ready", "host": self.me, "planes": self.planes})

    def carrier_events(self, now: float) -> None:
        for intf, up in self.watcher.events():
            self.endpoint.set_local_plane(self.interfaces.index(intf), up, now)

    def finish(self) -> None:
        """After the last turn: the exit record, then every socket closed."""
        self.log({"t": time.monotonic(), "event": "exit", **self.stats()})
        self.log.close()
        self.sockets.close()
        self.watcher.close()

    def run(self) -> int:
        return serve([self])


_CARRIER, _CONTROL = "carrier", "control"


def serve(agents: list[Agent], control=None) -> int:
    """Run the agents of one process until each is told to quit or the runner goes away:
    one event loop waits on every agent's plane sockets and carrier watcher, the control
    channel (`control`, stdin by default: lines naming their `host` when the process
    serves more than one) and the soonest of the agents' timers.

    A turn hands each readable socket to its agent, then lets send (Agent.flush) every
    agent that received, was told something, finished a job or has a timer due; each
    agent's next timer is asked again only then, since nothing else changes it. Making
    and checking messages share one budget a turn, the agents taking turns first, so
    that one process serving many hosts never holds packets longer than one serving
    one."""
    # select(2), not epoll: epoll timeouts are whole milliseconds (Python rounds them
    # up), so a plane whose pacer frees it in 50 us would idle a millisecond, twice the
    # gap between two packets of a 20 Mbit/s plane. select() sleeps to the microsecond.
    control = control or sys.stdin.buffer
    by_host = {agent.me: agent for agent in agents}
    roles: dict[int, tuple[Agent | None, object]] = {}
    for agent in agents:
        agent.process_hosts = len(agents)
        roles.update({fd: (agent, plane) for plane, fd in enumerate(agent.sockets.fds)})
        roles[agent.watcher.fileno()] = (agent, _CARRIER)
    os.set_blocking(control.fileno(), False)
    roles[control.fileno()] = (None, _CONTROL)
    fds = list(roles)
    pending = b""
    now = time.monotonic()
    for agent in agents:
        agent.start(now)
    every = min(agent.config.progress_s for agent in agents)
    next_progress = now + every
    loop_lag = agents[0].lag
    lag, turn = loop_lag.lag.add, loop_lag.turn.add
    wakes = {agent: agent.endpoint.next_wakeup(now) for agent in agents}
    busy: deque[Agent] = deque()  # agents with jobs, the next to step first
    monotonic, select_ = time.monotonic, select.select
    live = len(agents)
    woke = monotonic()
    while live:
        now = monotonic()
        turn(now - woke)
        soonest = min((w for w in wakes.values() if w is not None), default=now + 0.05)
        deadline = min(soonest, next_progress)
        timeout = 0.0 if busy else max(0.0, deadline - now)
        readable = select_(fds, (), (), timeout)[0]
        now = woke = monotonic()
        if timeout and now >= deadline and deadline != next_progress:
            lag(now - deadline)  # slept past a timer: the machine woke us late
        touched: set[Agent] = set()
        for fd in readable:
            agent, role = roles[fd]
            if role.__class__ is int:
                agent.receive(role, now)
                touched.add(agent)
            elif role is _CONTROL:
                chunk = control.read(65536)
                if not chunk:  # the runner went away
                    live = 0
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        touched.add(_dispatch(by_host, agents, line.decode(errors="replace")))
            else:
                agent.carrier_events(now)
                touched.add(agent)
        now = monotonic()
        touched.update(agent for agent, wake in wakes.items()
                       if wake is not None and wake <= now)
        for agent in touched:
            agent.flush(now)
            if agent.jobs and agent not in busy:
                busy.append(agent)
        if busy:
            touched.update(_run_jobs(busy))
        for agent in touched:
            wakes[agent] = agent.endpoint.next_wakeup(now)
        if now >= next_progress:
            lag(now - next_progress)  # the progress tick: late by the loop's work too
            next_progress = now + every
            for agent in agents:
                agent.log({"t": now, "event": "progress", **agent.endpoint.progress()})
        if live:
            live = sum(agent.running for agent in agents)
    for agent in agents:
        agent.finish()
    return 0


def _dispatch(by_host: dict[int, Agent], agents: list[Agent], line: str) -> Agent:
    """Hand one control line to the agent it names (`host`), or to the process's only
    agent; returns that agent."""
    try:
        cmd = json.loads(line)
        host = cmd.pop("host", None)
        agent = agents[0] if host is None and len(agents) == 1 else by_host[int(host)]
    except (ValueError, KeyError, TypeError) as err:
        agents[0].refuse(line, err)
        return agents[0]
    agent.obey(cmd, line)
    return agent


def _run_jobs(busy: deque[Agent], budget_s: float = JOB_BUDGET_S) -> list[Agent]:
    """Steps of the busy agents' jobs, one agent after another, for about `budget_s` in
    all; returns the agents that stepped (a finished job may have something to send)."""
    end = time.monotonic() + budget_s
    stepped = []
    while busy:
        agent = busy[0]
        agent.run_jobs(budget_s=0.0)  # one step
        stepped.append(agent)
        busy.rotate(-1)
        if not agent.jobs:
            busy.remove(agent)
        if time.monotonic() >= end:
            break
    return stepped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hosts.agent")
    parser.add_argument("--config", required=True, action="append",
                        help="per-host agent JSON; once per host the process serves")
    parser.add_argument("--netns", action="append",
                        help="the network namespace of each --config's host, in order "
                             "(/proc/<pid>/ns/net): its sockets are opened there; "
                             "without it, in the process's own")
    parser.add_argument("--profile", help="write a cProfile of the run to this file")
    args = parser.parse_args(argv)
    spaces = args.netns or [None] * len(args.config)
    if len(spaces) != len(args.config):
        parser.error("give one --netns per --config, or none")
    lag = LoopLag()
    agents = []
    for path, space in zip(args.config, spaces):
        try:
            config = AgentConfig.load(path)
            with netns.inside(space) if space else nullcontext():
                agents.append(Agent(config, lag=lag))
        except (OSError, ValueError, TypeError, KeyError) as err:
            print(json.dumps({"event": "error", "message": f"agent start failed ({path}): "
                                                           f"{err}"}), flush=True)
            return 2
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        try:
            return profiler.runcall(serve, agents)
        finally:
            profiler.dump_stats(args.profile)
    return serve(agents)


if __name__ == "__main__":
    sys.exit(main())
