"""Runner side of the host agents: start one per host, send commands, gather notifications.

Agents run in `python3 -m hosts.agent` processes, driven through JSON lines on their
stdin/stdout (see hosts/agent.py): a process per host inside its host's namespace, or
`processes` of them each serving a share of the hosts (every host's sockets opened in
its own namespace), so that two cores are not shared by sixty-four processes waking up
for a few packets each. A reader thread per process puts every notification, tagged
with its host, on one queue, so the runner can wait for many transfers at once.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from topologies.netns import namespace_of
from topologies.resolved import write_resolved_topology

REPO = Path(__file__).resolve().parents[2]
# MRC_PROFILE=1 makes every agent process write a cProfile next to its event logs.
PROFILE = os.environ.get("MRC_PROFILE") == "1"
# How many agent processes serve a fabric's hosts: one per core (MRC_AGENT_PROCESSES=N
# to choose; 0: one per host, each in its host's namespace). On 2 cores, two processes
# serving 2tier-8plane's eight hosts kept the calibration's all-to-all on time at 56
# Mbit/s of traffic per core (timers 4-7 ms late p99 against a 25.8 ms round trip),
# where eight processes fell behind (16-19 ms) and the budget was 40 (docs/similarity.md).
AGENT_PROCESSES = int(os.environ.get("MRC_AGENT_PROCESSES", os.cpu_count() or 1))


def host_groups(hosts: list[int], processes: int) -> list[list[int]]:
    """The hosts each agent process serves: one each (`processes` 0), or dealt out in
    turn to at most `processes` processes, so that hosts next to each other in number
    (a rack, a ring's neighbours) land on different cores."""
    if processes <= 0 or processes >= len(hosts):
        return [[h] for h in hosts]
    return [hosts[i::processes] for i in range(processes)]


class AgentError(RuntimeError):
    """An agent did not start, died, or reported an error."""


def agent_config(topology: Path, host: int, transport: str, events: Path,
                 protocol: dict | None, progress_s: float) -> dict:
    """What one agent's --config file holds (hosts/agent.py AgentConfig): the run's
    resolved topology, so that the agent works on the fabric the run built."""
    return {"host": host, "topology": str(topology), "transport": transport,
            "events": str(events), "protocol": protocol or {}, "progress_s": progress_s}


def ev_state_command(state: str, port: int | None = None, spine: int | None = None,
                     dst: int | None = None, ev: int | None = None) -> dict:
    """The control API's MODIFY_EV_STATE (hosts/mrc_ctl.py) as an agent command: `state`
    for the EV `ev` of the connection to `dst`, or for every EV of `port` (plane + 1;
    only those through T1 `spine`, if given) toward `dst` or, without it, toward every
    peer, now and later."""
    entry: dict = {"ev": ev} if ev is not None else {"port": port}
    if spine is not None:
        entry["spine"] = spine
    entry["state"] = state
    cmd = {"cmd": "modify_ev_profile", "ev_op": {"op": "MODIFY_EV_STATE", "entries": [entry]}}
    if dst is not None:
        cmd["dst"] = dst
    return cmd


class AgentSet:
    """One agent per host of the running fabric (`running`: experiments/run/fabric.py
    RunningFabric), which holds them as its `agents` until they stop. They read the
    run's topology.json (`topology`, else the one the lifecycle wrote for the fabric at
    bring-up, experiments/run/lifecycle.py); without one, the fabric's is written into
    `folder`."""

    def __init__(self, running, transport: str, folder: Path,
                 protocol: dict | None = None, progress_s: float = 0.05,
                 topology: Path | None = None, processes: int | None = None):
        self.running = running
        self.fabric = fabric = running.fabric
        self.transport = transport
        self.inbox: queue.Queue = queue.Queue()
        self.procs: dict[int, subprocess.Popen] = {}  # by host; a process may serve many
        self.shared: set[int] = set()  # hosts whose process serves others too
        self.threads: list[threading.Thread] = []
        # The fault timeline's thread sends route commands while the main thread sends
        # transfers: one line at a time on each agent's stdin.
        self._write = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        topology = topology or running.resolved_topology
        if topology is None:
            topology = folder / "topology.json"
            write_resolved_topology(topology, fabric)
        self.event_files = []
        args: dict[int, list[str]] = {}
        for host in fabric.hosts:
            config = folder / f"{host.name}.json"
            events = folder / f"events-{transport}-{host.name}.jsonl"
            self.event_files.append(events)
            config.write_text(json.dumps(agent_config(topology, host.index, transport, events,
                                                      protocol, progress_s)))
            args[host.index] = ["--config", str(config)]
        # A process serves hosts of one server: it opens their sockets through that
        # server's /proc (topologies/placement.py; one group on a fabric of one machine).
        by_server: dict[str, list[int]] = {}
        for host in fabric.hosts:
            node = running.net.get(host.name)
            by_server.setdefault(getattr(node, "server", ""), []).append(host.index)
        groups = [group for hosts in by_server.values() for group in host_groups(
            hosts, AGENT_PROCESSES if processes is None else processes)]
        # A server reads its hosts' files where this machine wrote them: sent there
        # first (a server's /tmp, or its disk, is its own), the events fetched at stop.
        self.remote: dict[int, object] = {}  # host -> its node on another server
        for server, hosts in by_server.items():
            if server:
                nodes = [running.net.get(fabric.host(h).name) for h in hosts]
                paths = [topology] + [folder / f"{fabric.host(h).name}.json" for h in hosts]
                nodes[0].put_files({str(p): Path(p).read_bytes() for p in paths})
                self.remote.update(zip(hosts, nodes))
        for hosts in groups:
            first = fabric.host(hosts[0]).name
            name = first if len(hosts) == 1 else f"agents-{len(self.threads)}"
            command = [sys.executable, "-m", "hosts.agent"]
            for h in hosts:
                command += args[h]
                if len(hosts) > 1:  # the others' sockets go in their own namespaces
                    command += ["--netns", namespace_of(running.net.get(
                        fabric.host(h).name).pid)]
                    self.shared.add(h)
            # Started in the first host's namespace, as a process of one host always was.
            proc = running.net.get(first).popen(
                command + (["--profile", str(folder / f"{name}.prof")] if PROFILE else []),
                cwd=str(REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=open(folder / f"{name}-{transport}.stderr", "w"))
            self.procs.update(dict.fromkeys(hosts, proc))
            thread = threading.Thread(target=self._read, args=(hosts, proc), daemon=True)
            thread.start()
            self.threads.append(thread)
        # The fabric's running agents are these now: faults that act through the agents
        # reach them there (experiments/faults/base.py Env.agents).
        running.agents = self
        # PFC pauses a host's NIC through its agent (experiments/dataplanes/pfc.py).
        self.pfc = running.pfc
        if self.pfc is not None:
            self.pfc.attach(self)

    def _read(self, hosts: list[int], proc: subprocess.Popen) -> None:
        """The notifications of the process serving `hosts`, each with its host (a line
        that names none, such as a failed start, is its first host's)."""
        for raw in proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                message = {"event": "error", "message": f"unreadable line {raw[:80]!r}"}
            if message.get("agent") not in hosts:
                message["agent"] = hosts[0]
            self.inbox.put(message)
        for host in hosts:
            self.inbox.put({"event": "exited", "agent": host, "code": proc.poll()})

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        waiting = set(self.procs)
        deadline = time.monotonic() + timeout_s
        while waiting:
            message = self.next(deadline)
            if message is None:
                raise AgentError(f"agents on {sorted(waiting)} did not start in {timeout_s}s")
            if message["event"] == "ready":
                waiting.discard(message["agent"])
            elif message["event"] in ("error", "exited"):
                raise AgentError(f"agent h{message['agent']}: {message.get('message', message)}")

    def next(self, deadline: float) -> dict | None:
        try:
            return self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def command(self, host: int, **cmd) -> None:
        proc = self.procs[host]
        if host in self.shared:
            cmd = {"host": host, **cmd}
        with self._write:
            proc.stdin.write((json.dumps(cmd) + "\n").encode())
            proc.stdin.flush()

    def modify_ev_state(self, host: int, state: str, **where) -> None:
        """Set the state of EVs on `host`'s agent (`ev_state_command`); the answer (or
        error) comes to the inbox."""
        self.command(host, **ev_state_command(state, **where))

    def stats(self, timeout_s: float = 5.0) -> dict[int, dict]:
        for host in self.procs:
            self.command(host, cmd="stats")
        result: dict[int, dict] = {}
        deadline = time.monotonic() + timeout_s
        while len(result) < len(self.procs):
            message = self.next(deadline)
            if message is None:
                break
            if message["event"] == "stats":
                result[message.pop("agent")] = message
        return result

    def stop(self) -> None:
        if self.running.agents is self:
            self.running.agents = None
        for host, proc in self.procs.items():
            if proc.poll() is None:
                try:
                    self.command(host, cmd="quit")
                except (BrokenPipeError, OSError):
                    pass
        deadline = time.monotonic() + 5
        for proc in dict.fromkeys(self.procs.values()):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for thread in self.threads:
            thread.join(timeout=2)
        for host, node in self.remote.items():  # each event log, from its host's server
            events = self.event_files[host]  # by host index, in the fabric's order
            try:
                events.write_bytes(node.get_file(str(events)))
            except OSError as err:
                self.inbox.put({"event": "error", "agent": host, "message": str(err)})
