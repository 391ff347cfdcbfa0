"""The CLI's session on a brought-up fabric: its agents, the faults set in it, and what
goes through the agents (messages sent, questions asked).

- Agents: one set at a time, of one transport; another transport means new agents on
  every host, as a run does between transports, and they start with the session's
  faults in place, as a run's agents with the faults in place before its start: each
  fault tells them what it has agents hear (`Fault.tell_agents`), their routing is told
  at once (experiments/run/workload_run.py `tell_routing`, delay 0) and a controller's
  denylist is set on them again.
- Faults: a step is applied and each host's routing told of it as the runner's fault
  player does (`with_routing`); `faults` keeps those set now, for `paths` and for new
  agents.
- Sends: one message per source, started and waited for as one phase of a run's
  workload (workload_run.py), then reported with the sender's counters around it.
- Mail: a `send ... &` waits in a thread while other commands ask the agents
  questions; the agents' messages are read by one waiter at a time, and one meant for
  the other waiter is kept for it (`next_message`).
"""

from __future__ import annotations

import itertools
import threading
import time
from functools import partial
from pathlib import Path

from experiments.dataplanes.reroute import RoutingState
from experiments.dataplanes.targets import apply_fault
from experiments.faults import Fault, Step
from experiments.interactive.parse import CommandError, SendRequest
from experiments.interactive.reports import path_lines, send_report
from experiments.run.agents import AgentError, AgentSet
from experiments.run.workload_run import TransportRun, play_phase, tell_routing, with_routing
from experiments.scenarios.workloads import Transfer

# How long an agent may take to answer a question (stats, path states).
ANSWER_S = 5.0
# Agent messages kept for another waiter (a background send, a question), newest last.
MAIL_KEPT = 500


class SendMail:
    """The agents as a run's phase uses them (`command`, `next`), over the session's
    mail: `next` gives only the messages `wanted` accepts, and an agent's error or exit
    is raised as the session reports it (`agent_failed`)."""

    def __init__(self, session: FabricSession, agents: AgentSet, wanted):
        self.session, self.agents, self.wanted = session, agents, wanted

    def command(self, host: int, **cmd) -> None:
        self.agents.command(host, **cmd)

    def next(self, deadline: float) -> dict | None:
        message = self.session.next_message(deadline, self.wanted)
        if message is not None and message["event"] in ("error", "exited"):
            self.session.agent_failed(message)
        return message


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
        self.background: threading.Thread | None = None  # `send ... &`
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
        agents = AgentSet(self.network, transport, self.folder / "agents", progress_s=1.0)
        self.agents = agents
        agents.wait_ready()
        # The faults set so far are in place before these agents' first message, as a
        # run's faults before its start (experiments/run/workload_run.py): the agents
        # hear what each fault has them hear, their routing has converged around them,
        # and a controller's denylist, which lives in the agents, is set on them again.
        routing = RoutingState(self.fabric)
        for fault in list(self.faults.values()):
            step = Step(0.0, False, fault, before_start=True)
            if fault.agent_side:
                apply_fault(self.network, step)
            fault.tell_agents(agents, self.fabric)
            tell_routing(agents, routing, step)
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

    def agent_failed(self, message: dict) -> None:
        """An agent reported an error or died: raise it; a dead agent means new agents
        for the next command."""
        text = f"agent h{message['agent']}: {message.get('message', message['event'])}"
        if message["event"] == "exited" and not self.closing:  # closing: being stopped
            self.stop_agents()
            text += " (the next command starts new agents)"
        raise AgentError(text)

    def next_message(self, deadline: float, wanted) -> dict | None:
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

    def ask(self, host: int, event: str, **cmd) -> dict:
        """Ask one agent a question and wait for its answer (messages it does not answer
        with are for a background send, or late answers to earlier commands)."""
        self.agents.command(host, **cmd)
        deadline = time.monotonic() + ANSWER_S
        while True:
            message = self.next_message(deadline, lambda m: m["agent"] == host and m[
                "event"] in (event, "error", "exited"))
            if message is None:
                raise AgentError(f"agent h{host} did not answer {cmd['cmd']!r} "
                                 f"within {ANSWER_S:g}s")
            if message["event"] == event:
                return message
            self.agent_failed(message)

    # -------------------------------------------------------------- sends
    def send(self, reqs: tuple[SendRequest, ...]) -> list[str]:
        """Send the messages of `reqs` (one transport, one per source) all at once, wait
        for each to be delivered and acknowledged, and report each (send_report)."""
        agents = self.agents_for(reqs[0].transport)
        before = {r.src: self.ask(r.src, "stats", cmd="stats") for r in reqs}
        # A generous bound: ten times the time the messages take on one plane.
        rate_bps = self.fabric.spec.host_t0.rate_mbit * 1e6
        timeout_s = 10.0 + 10 * sum(r.size for r in reqs) * 8 / rate_bps
        phase = [Transfer(r.src, r.dst, next(self.msg_ids), r.size) for r in reqs]
        ids, srcs, dst = {t.msg_id for t in phase}, {r.src for r in reqs}, reqs[0].dst

        def mine(m: dict) -> bool:
            return (m["event"] == "exited"
                    or (m["event"] == "error" and (m["agent"] in srcs or m["agent"] == dst))
                    or (m["event"] == "qp_error" and m["agent"] in srcs and m["dst"] == dst)
                    or (m.get("msg_id") in ids and m["event"] in ("delivered", "completed")))

        run = TransportRun(reqs[0].transport, time.monotonic())
        done = play_phase(SendMail(self, agents, mine), phase, 0, run, run.start + timeout_s)
        results = {(t.src, t.msg_id): t for t in run.transfers}
        lines = []
        for req, transfer in zip(reqs, phase):
            result = results[(transfer.src, transfer.msg_id)]
            took = None if result.delivered is None else result.delivered - result.start
            acked = None if result.completed is None else result.completed - result.start
            after = self.ask(req.src, "stats", cmd="stats")
            lines += send_report(req, self.fabric, took, acked, result.verified,
                                 before[req.src], after)
        if run.aborted:
            # A queue pair of a message passed its retry count: its work requests fail,
            # so the message never completes (a run aborts here too).
            lines.append(f"  stopped waiting {time.monotonic() - run.start:.1f} s in: a "
                         "queue pair of the message failed, so it cannot complete")
        elif not done:
            lines.append(f"  gave up after {timeout_s:.0f} s; a late answer is dropped")
        return lines

    # -------------------------------------------------------------- faults
    def fault(self, step: Step) -> str:
        apply = partial(apply_fault, self.network)
        if self.agents is None:  # nobody to tell; routing's view goes on for the next
            apply(step)
            self.routing.events(step)
        else:  # what each host's routing learns (the baselines move)
            with_routing(apply, self.agents, self.fabric, self.routing)(step)
        key = step.fault.key()
        if step.up:
            self.faults.pop(key, None)
        else:
            self.faults[key] = step.fault
        return f"{step.describe()}: done"

    # -------------------------------------------------------------- looking around
    def paths(self, src: int, peers: list[int]) -> list[str]:
        lines = []
        for dst in peers:
            evs, note = self.ev_states(src, dst)
            lines += path_lines(self.fabric, src, dst, self.faults, evs, note)
        return lines

    def ev_states(self, src: int, dst: int) -> tuple[list[dict] | None, str]:
        """The sender's EVs towards `dst` as its agent reports them (`paths` command),
        or None and why not."""
        if self.agents is None:
            return None, "no agents running"
        transport = self.agents.transport
        try:
            answer = self.ask(src, "paths", cmd="paths", dst=dst)
        except AgentError as err:
            return None, f"no EV states ({err})"
        peer = answer.get("peers", {}).get(str(dst))
        if peer is None:
            return None, (f"no {transport} connection from {self.fabric.host(src).name} "
                          "yet (send a message first)")
        return peer, f"EV states of the {transport} sender"
