"""The interactive fabric: `python3 -m experiments.interactive.cli --topo 2tier-2plane`
(`--dataplane auto`, the default, or kernel or bmv2).

Builds, shapes and programs the fabric as an experiment run does
(experiments/run/bringup.py), starts an MRC agent on every host, and opens Mininet's CLI
with the testbed's commands added (`help <command>` explains each):

    send h0 h3 [bytes] [transport]    one message through the agents, and what happened
                                      (h1,h2,h3 h0: three at once, an incast)
    link down|up a b                  fail or restore a link (also Mininet's `link a b down`)
    switch down|up|blackhole|restore s    reboot a switch (down, then up) or blackhole it
    port down|up h plane              a host's NIC port of one plane
    paths h [peer]                    the host's paths to a peer: route, faults on it, EV states
    evs h [peer]                      the host's EV profiles through the control API
    ev deny|allow|replace|explicit|probe|events ...   the control API as a controller uses
                                      it (experiments/interactive/cli_ev.py)
    tables s / counters s             a switch's tables and counters, as the data plane holds them
    p4shell s [write]                 p4runtime-shell on a BMv2 switch, read-only or writing

Faults are the scenarios' fault kinds (experiments/faults/kinds/), applied by the
same code. Mininet's own commands (`h0 ip -6 route`, `nodes`, `links`, `xterm h0`...)
work as usual. A bad command prints one line and the CLI goes on. Leaving (exit,
Ctrl-D, end of input, SIGTERM) stops the agents and tears the network down as a run
does (experiments/run/lifecycle.py), leaving no namespace, interface or process behind.

The session writes into a results folder (`results/<time>-<topology>-cli/`): the
resolved topology (`topology.json`) and the agents' configurations and event logs.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mininet.cli import CLI

from controller.tables import switch_tables
from experiments.dataplanes.reroute import RoutingState
from experiments.dataplanes.targets import apply_fault
from experiments.faults import Fault, Step
from experiments.faults.kinds.link import LinkFlap
from experiments.faults.kinds.port import NicPortDown
from experiments.faults.kinds.switch import Blackhole, SwitchReboot
from experiments.run.agents import AgentError, AgentSet
from hosts.protocol import MAX_MSG_LEN, ON_PLANES, TRANSPORTS, ev_choice
from topologies.errors import UserError
from topologies.model import Fabric
from topologies.paths import catalogue, path_nodes

REPO = Path(__file__).resolve().parents[2]
USAGE_ERROR = 2
DEFAULT_BYTES = 1_000_000
SIZE_UNITS = {"k": 1_000, "m": 1_000_000}
# Sender counters worth a word after a send (hosts/sender.py, hosts/baseline.py).
SEND_COUNTERS = (("data_tx", "packets sent"), ("retransmits", "retransmitted"),
                 ("retired", "EVs retired"), ("reinstated", "EVs reinstated"),
                 ("probes", "probes"), ("timeouts", "timeouts"), ("nacks", "NACKs"),
                 ("ecn_echoes", "ECN echoes"), ("reroutes", "reroutes"))
TESTBED_HELP = ("Testbed commands: send, link, switch, port, paths, evs, ev, tables, "
                "counters, p4shell; `help <command>` explains one. exit or Ctrl-D tears the fabric "
                "down.")
# How long an agent may take to answer a question (stats, path states).
ANSWER_S = 5.0
# Agent messages kept for another waiter (a background send, a question), newest last.
MAIL_KEPT = 500
# The columns of `counters`, as SONiC's `show interfaces counters` and `... trim` name
# them (each shown where the data plane counts it).
# `unroutable` (the P4 program's) counts by the port a packet came in on, the others
# by the port it left on or was dropped at.
COUNTER_COLUMNS = ("forwarded", "dropped", "unroutable", "ecn_marked", "trim_pkts",
                   "tx_trim_pkts", "dropped_trim_pkts", "pfc_xoff_tx", "pfc_xoff_rx",
                   "fault_dropped")
COUNTER_COLUMNS_TRIM = ("trim_pkts", "tx_trim_pkts", "dropped_trim_pkts")


class CommandError(UserError):
    """A CLI command with a bad argument: one line naming the argument and the fix."""


# ------------------------------------------------------------------ parsing (pure)
@dataclass(frozen=True)
class SendRequest:
    src: int
    dst: int
    size: int
    transport: str


@dataclass
class Outcome:
    """What became of one message of a `send`: when it was delivered (verified or
    not) and acknowledged, in seconds from the start; None until then."""
    req: SendRequest
    took: float | None = None
    acked: float | None = None
    verified: bool | None = None

    @property
    def done(self) -> bool:
        return self.took is not None and self.acked is not None


def host_index(fabric: Fabric, name: str, command: str, what: str = "host") -> int:
    hosts = {h.name: h.index for h in fabric.hosts}
    if name not in hosts:
        raise CommandError(command, what, f"{name!r} is not a host of {fabric.name}",
                           f"use h0..h{len(hosts) - 1}")
    return hosts[name]


def switch_name(fabric: Fabric, name: str, command: str) -> str:
    if name not in {s.name for s in fabric.switches}:
        raise CommandError(command, "switch", f"{name!r} is not a switch of {fabric.name}",
                           f"use one of `nodes`, e.g. {fabric.switches[0].name}")
    return name


def parse_size(text: str, command: str = "send") -> int:
    """Bytes: `1500`, `64k`, `1M` (decimal units)."""
    digits, unit = (text[:-1], text[-1].lower()) if text[-1:].isalpha() else (text, "")
    if unit and unit not in SIZE_UNITS or not digits.isdigit() or int(digits) == 0:
        raise CommandError(command, "bytes", f"{text!r} is not a size",
                           "give a positive number of bytes, e.g. 1500, 64k or 1M")
    size = int(digits) * SIZE_UNITS.get(unit, 1)
    if size > MAX_MSG_LEN:
        raise CommandError(command, "bytes", f"{size} is more than a message may hold",
                           f"send at most {MAX_MSG_LEN} bytes")
    return size


def parse_send(fabric: Fabric, args: list[str],
               transports: tuple[str, ...]) -> tuple[SendRequest, ...]:
    """`send SRC[,SRC...] DST [BYTES] [TRANSPORT]`, in any order after the hosts: one
    request per source, all to the same destination (several sources: an incast)."""
    usage = "send h0 h3 [bytes] [transport]"
    if not 2 <= len(args) <= 4:
        raise CommandError("send", "arguments", f"expected 2 to 4, got {len(args)}",
                           f"use `{usage}`, or `send h1,h2,h3 h0 ...` for an incast")
    names = args[0].split(",")
    srcs = [host_index(fabric, name, "send", "source") for name in names]
    if len(set(srcs)) != len(srcs):
        raise CommandError("send", "source", f"{args[0]!r} names a host twice",
                           "name each source once, e.g. h1,h2,h3")
    dst = host_index(fabric, args[1], "send", "destination")
    if dst in srcs:
        raise CommandError("send", "destination", "is the source itself",
                           "name two different hosts")
    size, transport = DEFAULT_BYTES, transports[0]
    for arg in args[2:]:
        if arg in transports:
            transport = arg
        elif arg[:1].isdigit():
            size = parse_size(arg)
        elif arg in TRANSPORTS:
            raise CommandError("send", "transport", f"{arg} runs on the single-plane twin of "
                               f"{fabric.name}, not on this fabric",
                               f"use {arg}{ON_PLANES} here, or start the CLI on the twin "
                               "(make cli TWIN=1)")
        else:
            raise CommandError("send", "transport", f"{arg!r} is not a transport",
                               f"use one of {', '.join(transports)}")
    return tuple(SendRequest(src, dst, size, transport) for src in srcs)


def _state(word: str, command: str, states: dict[str, bool]) -> bool:
    if word not in states:
        raise CommandError(command, "state", f"{word!r} is not one of {', '.join(states)}",
                           f"use `{command} {'|'.join(states)} ...`")
    return states[word]


def parse_link(fabric: Fabric, args: list[str]) -> Step:
    """`link down|up A B`, or Mininet's own order `link A B down|up`."""
    if len(args) == 3 and args[2] in ("up", "down"):
        args = [args[2], args[0], args[1]]
    if len(args) != 3:
        raise CommandError("link", "arguments", f"expected 3, got {len(args)}",
                           "use `link down p0t0r0 p0t1s0` or `link up p0t0r0 p0t1s0`")
    up = _state(args[0], "link", {"down": False, "up": True})
    a, b = args[1], args[2]
    if not any({link.a, link.b} == {a, b} for link in fabric.links):
        example = fabric.links[-1]
        raise CommandError("link", "nodes", f"{a} and {b} are not linked in {fabric.name}",
                           f"name the two ends of a link, e.g. {example.a} {example.b} "
                           "(see `net`)")
    return Step(0.0, up, LinkFlap(a, b))


SWITCH_STATES = {"down": (SwitchReboot, False), "up": (SwitchReboot, True),
                 "stop": (SwitchReboot, False), "start": (SwitchReboot, True),
                 "blackhole": (Blackhole, False), "restore": (Blackhole, True)}


def parse_switch(fabric: Fabric, args: list[str]) -> Step:
    """`switch down|up|blackhole|restore S`, or Mininet's own `switch S start|stop`."""
    if len(args) == 2 and args[1] in ("start", "stop"):
        args = [args[1], args[0]]
    if len(args) != 2:
        raise CommandError("switch", "arguments", f"expected 2, got {len(args)}",
                           "use `switch down|up|blackhole|restore p0t1s0`")
    if args[0] not in SWITCH_STATES:
        raise CommandError("switch", "state", f"{args[0]!r} is not a switch state",
                           "use down, up (a reboot), blackhole or restore")
    kind, up = SWITCH_STATES[args[0]]
    return Step(0.0, up, kind(switch_name(fabric, args[1], "switch")))


def parse_port(fabric: Fabric, args: list[str]) -> Step:
    """`port down|up HOST PLANE`."""
    if len(args) != 3:
        raise CommandError("port", "arguments", f"expected 3, got {len(args)}",
                           "use `port down h0 1` or `port up h0 1`")
    up = _state(args[0], "port", {"down": False, "up": True})
    host = fabric.host(host_index(fabric, args[1], "port")).name
    planes = fabric.spec.planes
    if not args[2].isdigit() or int(args[2]) >= planes:
        raise CommandError("port", "plane", f"{args[2]!r} is not a plane of {fabric.name}",
                           f"use 0..{planes - 1}")
    return Step(0.0, up, NicPortDown(host, int(args[2])))


def path_faults(nodes: list[str], plane: int, faults: dict[tuple, Fault]) -> list[str]:
    """The faults set in this session that cut a path of `plane` through `nodes`."""
    return [cut for fault in faults.values() if (cut := fault.cuts(nodes, plane))]


def ev_summary(evs: list[dict]) -> str:
    """`3 GOOD, 1 SKIP; out of rotation: 4 ASSUMED_BAD`: the EVs of one path by state,
    those the sender sprays over, then those it keeps aside (retired ones, spares)."""
    def by_state(states: list[str]) -> str:
        return ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))

    active = [e["state"] for e in evs if e.get("active", True)]
    aside = [e["state"] for e in evs if not e.get("active", True)]
    return (by_state(active) or "none in use") + (
        f"; out of rotation: {by_state(aside)}" if aside else "")


def send_report(req: SendRequest, fabric: Fabric, took: float | None, acked: float | None,
                verified: bool | None, before: dict, after: dict) -> list[str]:
    """What happened to one message, in two lines."""
    head = (f"{fabric.host(req.src).name} -> {fabric.host(req.dst).name} over "
            f"{req.transport}: {req.size} bytes")
    if took is None:
        lines = [f"{head} NOT delivered"]
    else:
        rate = req.size * 8 / took / 1e6 if took > 0 else 0.0
        check = "verified" if verified else "CORRUPTED (verification failed)"
        lines = [f"{head} delivered in {took:.3f} s ({rate:.1f} Mbit/s), {check}"
                 + (f", all acknowledged after {acked:.3f} s" if acked is not None
                    else ", NOT all acknowledged")]
    counts = [f"{label} {after[key] - before.get(key, 0)}" for key, label in SEND_COUNTERS
              if key in after]
    if counts:
        lines.append(f"  sender {fabric.host(req.src).name}: {', '.join(counts)}")
    errors = after.get("qp_errors", 0) - before.get("qp_errors", 0)
    if errors:
        lines.append(f"  {errors} queue pair(s) went to the error state (a packet timed out "
                     "past the retry count): a training job would abort here")
    return lines


# ------------------------------------------------------------------ the running fabric
class FabricSession:
    """A brought-up network, its agents and the faults set so far."""

    def __init__(self, network, folder: Path, transports: tuple[str, ...]):
        self.network = network
        self.net, self.fabric, self.target = network.net, network.fabric, network.target
        self.folder = folder
        self.transports = transports
        self.agents: AgentSet | None = None
        self.msg_ids = itertools.count()
        self.faults: dict[tuple, Fault] = {}
        # What the fabric's routing holds down, over the whole session: overlapping
        # faults give a path back only when the last one holding it ends.
        self.routing = RoutingState(self.fabric)
        # `send ... &` waits in a thread while commands go on: the agents' messages are
        # read by one waiter at a time, and one meant for the other waiter is kept here.
        self.background: threading.Thread | None = None
        self.closing = False  # the fabric is being torn down (a background send may end)
        self._mail: list[dict] = []
        self._mail_lock = threading.Lock()
        self._reading = threading.Lock()

    # -------------------------------------------------------------- agents
    def agents_for(self, transport: str) -> AgentSet:
        """The agents of `transport`; an agent runs one transport, so another one means
        new agents on every host (as a run does between transports)."""
        if self.agents is not None and self.agents.transport == transport:
            return self.agents
        if self.closing:  # a background send that starts late must not start agents
            raise AgentError("the fabric is going down")
        if self.background is not None and self.background.is_alive():
            raise CommandError("send", "transport", f"a background send over "
                               f"{self.agents.transport} is still running, and {transport} "
                               "needs new agents", f"wait for it, or send over "
                               f"{self.agents.transport}")
        self.stop_agents()
        # Progress samples once a second: an idle session should not fill the disk.
        agents = AgentSet(self.net, self.fabric, transport, self.folder / "agents",
                          progress_s=1.0)
        self.agents = agents
        agents.wait_ready()
        for fault in list(self.faults.values()):  # a controller's denylist lives in agents
            if fault.agent_side:
                apply_fault(self.net, self.fabric, Step(0.0, False, fault), self.target)
        return agents

    def stop_agents(self) -> None:
        if self.agents is not None:
            self.agents.stop()
            self.agents = None

    def close(self) -> None:
        """Stop the agents; a background send ends with them, and its report (cut
        short) is printed before the fabric goes down, not after."""
        self.closing = True
        self.stop_agents()
        if self.background is not None:
            self.background.join(timeout=ANSWER_S)

    def _agent_failed(self, message: dict) -> None:
        """An agent reported an error or died: say so; a dead agent means new agents
        for the next command."""
        text = f"agent h{message['agent']}: {message.get('message', message['event'])}"
        if message["event"] == "exited" and not self.closing:  # closing: being stopped
            self.stop_agents()
            text += " (the next command starts new agents)"
        raise AgentError(text)

    def _next(self, deadline: float, wanted) -> dict | None:
        """The next agent message `wanted(message)` accepts, or None at the deadline; a
        message it does not want is kept for the other waiter (the last MAIL_KEPT)."""
        agents = self.agents
        while True:
            with self._mail_lock:
                for i, message in enumerate(self._mail):
                    if wanted(message):
                        return self._mail.pop(i)
            if time.monotonic() >= deadline:
                return None
            with self._reading:  # short turns: the other waiter checks the mail between
                message = agents.next(min(deadline, time.monotonic() + 0.1))
            if message is None:
                continue
            if wanted(message):
                return message
            with self._mail_lock:
                self._mail.append(message)
                del self._mail[:-MAIL_KEPT]

    def _answer(self, host: int, event: str, **cmd) -> dict:
        """Ask one agent a question and wait for its answer (messages it does not answer
        with are for a background send, or late answers to earlier commands)."""
        agents = self.agents
        agents.command(host, **cmd)
        deadline = time.monotonic() + ANSWER_S
        while True:
            message = self._next(deadline, lambda m: m["agent"] == host and m["event"] in (
                event, "error", "exited"))
            if message is None:
                raise AgentError(f"agent h{host} did not answer {cmd['cmd']!r} "
                                 f"within {ANSWER_S:g}s")
            if message["event"] == event:
                return message
            self._agent_failed(message)

    def send(self, reqs: tuple[SendRequest, ...]) -> list[str]:
        """Send the messages of `reqs` (one transport, one per source) all at once, wait
        for each to be delivered and acknowledged, and report each (send_report)."""
        agents = self.agents_for(reqs[0].transport)
        before = {r.src: self._answer(r.src, "stats", cmd="stats") for r in reqs}
        # A generous bound: ten times the time the messages take on one plane.
        rate_bps = self.fabric.spec.host_t0.rate_mbit * 1e6
        timeout_s = 10.0 + 10 * sum(r.size for r in reqs) * 8 / rate_bps
        waiting = {next(self.msg_ids): Outcome(r) for r in reqs}
        start = time.monotonic()
        for msg_id, outcome in waiting.items():
            agents.command(outcome.req.src, cmd="send", dst=outcome.req.dst, msg_id=msg_id,
                           bytes=outcome.req.size)
        srcs, dst = {r.src for r in reqs}, reqs[0].dst
        deadline = start + timeout_s

        def mine(m: dict) -> bool:
            return (m["event"] == "exited"
                    or (m["event"] == "error" and (m["agent"] in srcs or m["agent"] == dst))
                    or (m["event"] == "qp_error" and m["agent"] in srcs and m["dst"] == dst)
                    or (m.get("msg_id") in waiting and (m["event"] == "delivered"
                                                        or m["event"] == "completed")))

        failed_qp = False
        while any(not o.done for o in waiting.values()):
            message = self._next(deadline, mine)
            if message is None:
                break
            kind = message["event"]
            if kind == "qp_error":
                # A queue pair of a message passed its retry count: its work requests
                # fail, so the message never completes (a run aborts here too).
                failed_qp = True
                break
            if kind == "exited" or kind == "error":
                self._agent_failed(message)
            outcome = waiting[message["msg_id"]]
            if kind == "delivered" and message["agent"] == dst:
                outcome.took = message["t"] - start
                outcome.verified = bool(message["verified"])
            elif kind == "completed" and message["agent"] == outcome.req.src:
                outcome.acked = message["t"] - start
        lines = []
        for outcome in waiting.values():
            after = self._answer(outcome.req.src, "stats", cmd="stats")
            lines += send_report(outcome.req, self.fabric, outcome.took, outcome.acked,
                                 outcome.verified, before[outcome.req.src], after)
        if failed_qp:
            lines.append(f"  stopped waiting {time.monotonic() - start:.1f} s in: a queue pair "
                         "of the message failed, so it cannot complete")
        elif any(not o.done for o in waiting.values()):
            lines.append(f"  gave up after {timeout_s:.0f} s; a late answer is dropped")
        return lines

    # -------------------------------------------------------------- faults
    def fault(self, step: Step) -> str:
        apply_fault(self.net, self.fabric, step, self.target)
        events = self.routing.events(step)
        if self.agents is not None:  # what each host's routing learns (the baselines move)
            for event in events:
                self.agents.command(event.host, **event.command())
        key = step.fault.key()
        if step.up:
            self.faults.pop(key, None)
        else:
            self.faults[key] = step.fault
        return f"{step.describe()}: done"

    # -------------------------------------------------------------- looking around
    def paths(self, src: int, peers: list[int]) -> list[str]:
        lines = []
        name = self.fabric.host(src).name
        for dst in peers:
            route = catalogue(self.fabric, src, dst)
            evs, note = self._ev_states(src, dst)
            lines.append(f"{name} -> {self.fabric.host(dst).name}: {len(route)} paths; "
                         f"{note}")
            for path in route:
                nodes = path_nodes(self.fabric, path.usids, name)
                cut = path_faults(nodes, path.plane, self.faults)
                lines.append(f"  plane {path.plane}  {' > '.join(nodes):40} {path.address}")
                text = f"      network: {'; '.join(cut) if cut else 'no fault set'}"
                if evs is not None:
                    choice = ev_choice(path.ev)
                    text += "   EVs: " + ev_summary(
                        [e for e in evs if e["plane"] == path.plane and e["path"] == choice])
                lines.append(text)
        return lines

    def _ev_states(self, src: int, dst: int) -> tuple[list[dict] | None, str]:
        """The sender's EVs towards `dst` as its agent reports them (`paths` command),
        or None and why not."""
        if self.agents is None:
            return None, "no agents running"
        transport = self.agents.transport
        try:
            answer = self._answer(src, "paths", cmd="paths", dst=dst)
        except AgentError as err:
            return None, f"no EV states ({err})"
        peer = answer.get("peers", {}).get(str(dst))
        if peer is None:
            return None, (f"no {transport} connection from {self.fabric.host(src).name} "
                          "yet (send a message first)")
        return peer, f"EV states of the {transport} sender"

    def tables(self, switch: str) -> list[str]:
        if self.target.name == "bmv2":
            return self._p4_tables(switch)
        tables = switch_tables(self.fabric, self.fabric.node(switch))
        lines = [f"{switch}: static tables (controller/tables.py): my uSID "
                 f"{tables.my_usid:#06x}, {len(tables.routes)} routes, "
                 f"{len(tables.ports)} ports; installed in the kernel:"]
        node = self.net.get(switch)
        for command in ("ip -6 route show", "ip -6 neigh show"):
            lines.append(f"  $ {command}")
            lines += ["    " + line for line in node.cmd(command).strip().splitlines()]
        return lines

    def _p4_tables(self, switch: str) -> list[str]:
        from controller.bmv2_entries import MY_USID, NEXT_HOP, PORT_CONFIG
        from experiments.interactive.p4shell import connect, disconnect, find_switch

        shell = connect(find_switch(switch, "tables"))
        try:
            lines = []
            for table in (MY_USID, NEXT_HOP, PORT_CONFIG):
                entries = list(shell.TableEntry(table).read())
                lines.append(f"{switch}: {table}: {len(entries)} entries")
                for entry in entries:
                    lines += ["    " + line for line in str(entry).strip().splitlines()]
            return lines
        finally:
            disconnect()

    def counters(self, switch: str, trim_only: bool = False) -> list[str]:
        """A switch's per-port counters as the data plane counts them (the eBPF switch
        program, the P4 program), in columns as SONiC's `show interfaces counters`
        shows them; `trim_only`: its `show interfaces counters trim`. On a kernel
        fabric without the eBPF program, the kernel's own interface counters."""
        found = self.target.switch_counters(self.net, self.fabric, [switch]).get(switch)
        if not found:
            return self._kernel_counters(switch)
        names = [n for n in (COUNTER_COLUMNS_TRIM if trim_only else COUNTER_COLUMNS)
                 if any(n in c for c in found.values())]
        title = "show interfaces counters" + (" trim" if trim_only else "")
        heads = [name.upper() for name in names]
        widths = [max(len(h), 7) for h in heads]
        lines = [f"{switch}: {title}",
                 f"  {'IFACE':14} {'PEER':8} " + " ".join(f"{h:>{w}}" for h, w in
                                                         zip(heads, widths))]
        for port in self.fabric.ports(switch):
            values = found.get(port.intf, {})
            lines.append(f"  {port.intf:14} {port.peer:8} " + " ".join(
                f"{values.get(n, 0):>{w}}" for n, w in zip(names, widths)))
        return lines

    def _kernel_counters(self, switch: str) -> list[str]:
        node = self.net.get(switch)
        found = json.loads(node.cmd("ip -s -j link show") or "[]")
        stats = {entry["ifname"]: entry.get("stats64", {}) for entry in found}
        lines = [f"{switch}: kernel interface counters (packets; no eBPF switch program "
                 "here, so no trimming, marking or PFC counts)",
                 f"  {'port':18} {'peer':8} {'rx':>9} {'tx':>9} {'rx drop':>8} {'tx drop':>8}"]
        for port in self.fabric.ports(switch):
            s = stats.get(port.intf, {})
            rx, tx = s.get("rx", {}), s.get("tx", {})
            lines.append(f"  {port.intf:18} {port.peer:8} {rx.get('packets', 0):>9} "
                         f"{tx.get('packets', 0):>9} {rx.get('dropped', 0):>8} "
                         f"{tx.get('dropped', 0):>8}")
        return lines


# ------------------------------------------------------------------ the CLI
class FabricCLI(CLI):
    """Mininet's CLI with the testbed's commands. Each `do_<name>` docstring is its
    `help <name>` text."""

    def __init__(self, session: FabricSession, **kwargs):
        self.session = session
        self.fabric = session.fabric
        super().__init__(session.net, **kwargs)

    def do_help(self, line: str) -> None:
        """List the commands, or explain one: help send"""
        method = getattr(self, f"do_{line.strip()}", None)
        if method is not None and type(self).__dict__.get(method.__name__) is not None:
            self.say(inspect.cleandoc(method.__doc__))
            return
        super().do_help(line)
        if not line:
            self.say(TESTBED_HELP)

    def say(self, lines: list[str] | str) -> None:
        for line in [lines] if isinstance(lines, str) else lines:
            print(line, flush=True)

    def _run(self, work) -> None:
        """Run one command; a mistake or a failure is one line and the CLI goes on."""
        try:
            self.say(work())
        except UserError as err:
            self.say(f"error: {err}")
        except Exception as err:  # noqa: BLE001 - one line, the fabric stays up for the next
            self.say(f"error: {err.__class__.__name__}: {err}")

    def _background(self, reqs: tuple[SendRequest, ...], what: str) -> None:
        """A background send (`send ... &`): its report, or one line on failure. Cut
        short by the fabric's teardown (exit while it runs), it says so, not why its
        agents went away."""

        def work() -> str:
            try:
                return self.session.send(reqs)
            except Exception:
                if self.session.closing:
                    return f"the background send {what} was cut short: the fabric is going down"
                raise

        self._run(work)

    def do_send(self, line: str) -> None:
        """Send one message through the agents and print what happened.
        Usage: send SRC DST [BYTES] [TRANSPORT] [&]    e.g. send h0 h3 1M mrc
        Several sources, comma separated, start together towards DST, a message each:
        an incast (send h1,h2,h3 h0 2M fills h0's last hops and trims).
        With & at the end the transfer goes on in the background and prints its report
        when done, so that `link down`, `port down` or `paths` can be typed during it
        (one background send at a time).
        BYTES: 1500, 64k, 1M (default 1M = 1000000). TRANSPORT: mrc (default),
        mrc-no-trim, mrc-no-probe, and the RoCE baseline: roce, roce-8, roce-16 (and -pfc
        without DCQCN) on a single-plane fabric (make cli TWIN=1), with @planes on a
        multi-plane one (roce-8@planes). A new transport restarts the agents.
        Prints delivery, verification, time and the sender's counters during the
        transfer: retransmissions, EVs retired and reinstated, probes, timeouts..."""
        session = self.session
        args = line.replace("&", " & ").split()
        if args[-1:] != ["&"]:
            self._run(lambda: session.send(parse_send(self.fabric, args, session.transports)))
            return

        def start() -> str:
            if session.background is not None and session.background.is_alive():
                raise CommandError("send", "&", "a background send is still running",
                                   "wait for its report (one at a time)")
            reqs = parse_send(self.fabric, args[:-1], session.transports)
            session.agents_for(reqs[0].transport)  # a transport change fails here, not later
            session.background = threading.Thread(
                target=self._background, args=(reqs, f"{args[0]} -> {args[1]}"), daemon=True)
            session.background.start()
            return (f"sending {reqs[0].size} bytes {args[0]} -> {args[1]} over "
                    f"{reqs[0].transport} in the background; its report comes when it is "
                    "done")

        self._run(start)

    def do_link(self, line: str) -> None:
        """Fail or restore a link (both ends at once, as a cut cable).
        Usage: link down|up A B    e.g. link down p0t0r0 p0t1s0
        Mininet's order works too: link p0t0r0 p0t1s0 down"""
        self._run(lambda: self.session.fault(parse_link(self.fabric, line.split())))

    def do_switch(self, line: str) -> None:
        """Reboot or blackhole a switch.
        Usage: switch down|up|blackhole|restore S    e.g. switch down p0t1s0
        down: the switch loses power (ports dark, tables gone); up: it boots and gets
        the same static tables again. blackhole: it silently drops everything, links
        stay up; restore: it forwards again."""
        self._run(lambda: self.session.fault(parse_switch(self.fabric, line.split())))

    def do_port(self, line: str) -> None:
        """Take a host's NIC port of one plane down or up (the agent sees carrier loss).
        Usage: port down|up HOST PLANE    e.g. port down h0 1"""
        self._run(lambda: self.session.fault(parse_port(self.fabric, line.split())))

    def do_evs(self, line: str) -> None:
        """A host's EV profiles, through the control API (OCP MRC's query_ev_profile):
        per connection its mode (GEN, or EXP for an explicit array), ev_count,
        ev_min_active and event mask, then every EV: its port (plane + 1), the T1 of its
        path, its state (GOOD, ASSUMED_BAD, DENIED), whether it is in use, when it last
        carried a packet, and the packets its path has carried.
        Usage: evs HOST [PEER]    e.g. evs h0 h3"""
        from experiments.interactive.cli_ev import EvCommands, parse_evs

        self._run(lambda: EvCommands(self.session).evs(*parse_evs(self.fabric, line.split())))

    def do_ev(self, line: str) -> None:
        """The control API as a fabric controller uses it (hosts/mrc_ctl.py, named as
        OCP MRC's mrc_ctl.h names it). An EV names a path: its state is its path's.
          ev deny|allow HOST [PEER] plane P [spine S]
              a controller's denylist (the scenarios' `deny` kind): every EV of plane P
              (through T1 S only, if given) of HOST's connections, toward every peer
              (those it opens later too) or toward PEER, DENIED, or GOOD again
              e.g. ev deny h2 plane 1; ev allow h2 plane 1
          ev deny|allow HOST PEER EV       one EV (its path) of one connection
          ev replace HOST PEER OLD NEW     REPLACE_EV: NEW (same plane) takes OLD's place
          ev explicit HOST PEER EV [EV...] an explicit EV array (ev_mode EXP): the
                                           connection sprays over these alone
          ev probe HOST PEER [plane P [spine S]]
              EV probes (ep_batch_send_wait) on each path, each one's round trip
          ev events HOST [PEER] [GOOD] [ASSUMED_BAD] | off
              the EV event mask; `ev events HOST [PEER]` then shows the events received
              (state changes, with the reason: timeout, gap, probes, operator...)
        EV values as `evs` shows them (0x01000005: plane 1 in the top byte)."""
        from experiments.interactive.cli_ev import EvCommands, parse_ev

        self._run(lambda: EvCommands(self.session).ev(parse_ev(self.fabric, line.split())))

    def do_paths(self, line: str) -> None:
        """A host's paths to a peer (or to every other host): the switches on each
        path, its uSID address, the faults of this session that cut it, and the state
        of the sender's EVs on it (GOOD, SKIP, ASSUMED_BAD, DENIED).
        Usage: paths HOST [PEER]    e.g. paths h0 h3"""
        def work():
            args = line.split()
            if not 1 <= len(args) <= 2:
                raise CommandError("paths", "arguments", f"expected 1 or 2, got {len(args)}",
                                   "use `paths h0` or `paths h0 h3`")
            src = host_index(self.fabric, args[0], "paths")
            if len(args) == 2:
                peers = [host_index(self.fabric, args[1], "paths", "peer")]
                if peers == [src]:
                    raise CommandError("paths", "peer", "is the host itself",
                                       "name another host")
            else:
                peers = [h.index for h in self.fabric.hosts if h.index != src]
            return self.session.paths(src, peers)

        self._run(work)

    def do_tables(self, line: str) -> None:
        """A switch's tables as the data plane holds them: on BMv2, the P4 table
        entries read over P4Runtime; on the kernel, the static tables and the routes
        and neighbours installed in the switch's namespace.
        Usage: tables S    e.g. tables p0t0r0"""
        self._run(lambda: self.session.tables(self._one_switch(line, "tables")))

    def do_counters(self, line: str) -> None:
        """A switch's per-port counters, as the data plane counts them (forwarded,
        dropped, unroutable on BMv2 by the port it came in on, ECN-marked, trimmed
        under SONiC's names TRIM_PKTS, TX_TRIM_PKTS and DROPPED_TRIM_PKTS, PFC
        pauses); `trim` shows SONiC's `show interfaces counters trim` alone.
        Usage: counters S [trim]    e.g. counters p0t1s0 trim"""
        args = line.split()
        trim_only = args[-1:] == ["trim"]
        if trim_only:
            args = args[:-1]
        self._run(lambda: self.session.counters(
            self._one_switch(" ".join(args), "counters"), trim_only))

    def do_p4shell(self, line: str) -> None:
        """Open p4runtime-shell on a BMv2 switch, read-only, or writing by hand with
        `write` (exit returns here; Ctrl-C stays in the shell).
        Usage: p4shell S [write]    e.g. p4shell p0t0r0
        Try: table_entry["MrcIngress.my_usid"].read(lambda e: print(e))"""
        from experiments.run.lifecycle import ctrl_c_held

        args = line.split()
        write = args[-1:] == ["write"]
        try:
            switch = self._one_switch(" ".join(args[:-1] if write else args), "p4shell")
            if self.session.target.name != "bmv2":
                raise CommandError("p4shell", "data plane",
                                   f"this fabric runs on {self.session.target.name}",
                                   "start the CLI with --dataplane bmv2 (make cli "
                                   "DATAPLANE=bmv2)")
        except UserError as err:
            self.say(f"error: {err}")
            return
        # Ctrl-C reaches the whole terminal's process group: the shell takes it (and
        # stays), the CLI must not (it would end the shell with it).
        with ctrl_c_held():
            subprocess.call([sys.executable, "-m", "experiments.interactive.p4shell",
                             "--switch", switch]
                            + (["--write"] if write else []), cwd=REPO)

    def _one_switch(self, line: str, command: str) -> str:
        args = line.split()
        if len(args) != 1:
            raise CommandError(command, "arguments", f"expected 1, got {len(args)}",
                               f"use `{command} {self.fabric.switches[0].name}`")
        return switch_name(self.fabric, args[0], command)


# ------------------------------------------------------------------ entry point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m experiments.interactive.cli",
        description="Build and program a fabric, start the agents, open Mininet's CLI "
                    "with the testbed's commands; exit tears everything down.")
    parser.add_argument("--topo", default="2tier-2plane", help="topology name or YAML path")
    parser.add_argument("--dataplane", default="auto", help="auto, kernel or bmv2")
    parser.add_argument("--capture", default=None, metavar="SPEC",
                        help="capture packets into the session folder: 1 for the default "
                             "ports, or nodes and node:port, comma separated "
                             "(docs/wireshark.md)")
    parser.add_argument("--results", default="results", help="folder for the session folder")
    parser.add_argument("--mtu", type=int, default=None,
                        help="payload bytes per DATA packet instead of the topology's "
                             "mtu_payload (e.g. 4096)")
    parser.add_argument("--twin", action="store_true",
                        help="build the topology's single-plane twin, where the RoCE "
                             "transports run (experiments/dataplanes/twin.py)")
    parser.add_argument("--p4", type=Path, default=None, metavar="MAIN",
                        help="run this P4 main file on BMv2 instead of p4src/'s, e.g. a "
                             "lab's program (`make cli LAB=03`, labs/p4lab.py)")
    args = parser.parse_args(argv)

    from experiments.dataplanes.twin import fabric_of, twin_of
    from experiments.run.lifecycle import PREFLIGHT_ERRORS, Run
    from topologies.model import load_topology

    try:
        fabric = load_topology(args.topo, args.mtu)
        if args.twin:
            fabric = twin_of(fabric)
        # A session caps its links from the machine's measured budget, or the default
        # where none is cached: it never spends a minute calibrating before a prompt.
        run = Run.prepare("cli", fabric, args.dataplane, args.results, args.capture,
                          program=args.p4, cap="cached")
    except PREFLIGHT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    # The transports that run on this fabric: on a multi-plane one MRC and RoCE with
    # @planes, on a single-plane one (its own twin) every transport.
    return _session(run, tuple(t for t in TRANSPORTS if fabric_of(t, fabric) is fabric))


def _session(run, transports: tuple[str, ...]) -> int:
    from mininet.log import setLogLevel

    from experiments.run.lifecycle import ctrl_c_held

    setLogLevel("output")
    with run:
        network = run.up()
        session = FabricSession(network, run.folder, transports)
        try:
            session.agents_for(transports[0])
            print(f"fabric up in {network.bringup_s:.1f} s, {network.table_writes} table "
                  f"writes; an {transports[0]} agent on every host; session folder "
                  f"{run.folder}", flush=True)
            print(TESTBED_HELP, flush=True)
            FabricCLI(session)
        finally:
            with ctrl_c_held():  # from here to the end of the teardown
                session.close()
        run.status = 0
    print(f"torn down; session folder {run.folder}", flush=True)
    return run.status


if __name__ == "__main__":
    sys.exit(main())
