"""Run a workload with host agents under a fault schedule, once per transport.

For each transport of the scenario (e.g. `mrc`, then `roce-8`) on the same network:
apply the faults in place before the start (`before_start`), start fresh agents, start
the fault timeline, play the workload's phases (a phase starts when the previous one
was delivered, verified and acknowledged), restore whatever a fault left down, gather
the agents' counters, stop them. Transfers that do not finish before the scenario's
timeout count as failed, as a crashed job would. A RoCE queue pair past its retry limit
(hosts/baseline.py) ends its transport's run at once, as it would abort a training job:
`aborted` says when and which.

The fabric's switches are programmed with static source-routed tables and run no
routing protocol, so for the baseline transports the fault timeline also plays the
routing protocol's part: right after each fault step, every host whose routing would
hear of it gets a `route` command (experiments/dataplanes/reroute.py says which paths, and whether
local or remote); its agent applies the kind's delay. For a fault in place before the
start the command says `delay_s: 0`: routing converged around it long before the job,
so the agents start with those paths already gone. MRC agents get none: MRC finds dead
paths by its own packets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from experiments.dataplanes.reroute import RoutingState
from experiments.faults import FaultInjector, Step, apply_before_start
from experiments.run.agents import AgentSet
from experiments.scenarios.workloads import Transfer
from hosts.protocol import transport_spec

# How often each agent samples the bytes it received (its `progress` events): the grain
# of every throughput series (experiments/analysis/metrics.py, timeseries.py).
PROGRESS_S = 0.05


@dataclass
class TransferResult:
    src: int
    dst: int
    msg_id: int
    size: int
    role: str
    phase: int
    start: float
    delivered: float | None = None  # receiver has every byte, verified
    completed: float | None = None  # sender has every acknowledgement
    verified: bool = False

    @property
    def done(self) -> bool:
        return self.delivered is not None and self.completed is not None and self.verified

    def fct(self) -> float | None:
        return None if self.delivered is None else self.delivered - self.start


@dataclass
class TransportRun:
    transport: str
    start: float
    end: float = 0.0
    transfers: list[TransferResult] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)
    fault_errors: list[str] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    timed_out: bool = False
    event_files: list[Path] = field(default_factory=list)
    # The first queue pair that went to the error state (hosts/baseline.py): the job
    # would abort here. {"t": seconds from the start, "src", "dst", "qp"}.
    aborted: dict | None = None

    @property
    def ok(self) -> bool:
        return not self.timed_out and not self.aborted and all(t.done for t in self.transfers)



def run_transport(running, transport: str, phases: list[list[Transfer]],
                  steps: list[Step], apply_fault, folder: Path, timeout_s: float,
                  protocol: dict, progress, progress_s: float = PROGRESS_S) -> TransportRun:
    """Play `phases` with `transport`'s agents on the running fabric (`running`:
    experiments/run/fabric.py RunningFabric) under the fault `steps`, each applied by
    `apply_fault(step)` (module docstring)."""
    fabric = running.fabric
    baseline = transport_spec(transport).baseline
    # Faults in place before the start are there before the agents: each agent finds its
    # ports as the job would (a dead port is dead when it starts).
    played, early_errors, early = apply_before_start(
        [s for s in steps if s.before_start], apply_fault)
    injector = FaultInjector([s for s in steps if not s.before_start], apply_fault,
                             played=(played, early))
    agents = None
    try:
        agents = AgentSet(running, transport, folder / "agents", protocol, progress_s)
        agents.wait_ready()
        for step in early:
            step.fault.tell_agents(agents, fabric)
        if baseline:
            routing = RoutingState(fabric)
            for step in early:
                tell_routing(agents, routing, step)
            injector.apply = with_routing(apply_fault, agents, fabric, routing)
        start = time.monotonic()
        run = TransportRun(transport, start, event_files=agents.event_files)
        injector.start(start)
        deadline = start + timeout_s
        for index, phase in enumerate(phases):
            if not play_phase(agents, phase, index, run, deadline):
                if run.aborted:
                    a = run.aborted
                    progress(f"  {transport}: queue pair {a['qp']} of h{a['src']} -> "
                             f"h{a['dst']} went to the error state at {a['t']:.2f}s (past "
                             "its retry limit): the job would abort here")
                else:
                    run.timed_out = True
                    progress(f"  {transport}: phase {index + 1}/{len(phases)} did not "
                             f"finish within {timeout_s:g}s")
                break
        run.end = time.monotonic()
        injector.stop(restore=apply_fault)
        run.faults, run.fault_errors = injector.log, early_errors + injector.errors
        run.stats = agents.stats()
        return run
    finally:
        # Whatever happened, nothing of this transport's faults stays for the next one.
        injector.stop(restore=apply_fault)
        if agents is not None:
            agents.stop()


def with_routing(apply_fault, agents: AgentSet, fabric, routing: RoutingState | None = None):
    """`apply_fault`, then tell each host what its routing learns of the step
    (`routing`: the faults already in place, e.g. before the start)."""
    routing = routing or RoutingState(fabric)

    def apply(step: Step) -> None:
        apply_fault(step)
        tell_routing(agents, routing, step)

    return apply


def tell_routing(agents: AgentSet, routing: RoutingState, step: Step) -> None:
    """Send each host what its routing learns of a fault step (a `route` command)."""
    for event in routing.events(step):
        agents.command(event.host, **event.command())


def play_phase(agents: AgentSet, phase: list[Transfer], index: int, run: TransportRun,
                deadline: float) -> bool:
    """Start the phase's transfers, each `start_s` after the phase starts, and wait until
    every one is delivered and acknowledged; False on the deadline or a queue pair's
    error."""
    begin = time.monotonic()
    results: dict[tuple[int, int, int], TransferResult] = {}
    waiting = sorted(phase, key=lambda t: t.start_s)  # not started yet

    def start_due(now: float) -> None:
        while waiting and begin + waiting[0].start_s <= now:
            t = waiting.pop(0)
            result = TransferResult(t.src, t.dst, t.msg_id, t.size, t.role, index, now)
            results[(t.src, t.dst, t.msg_id)] = result
            run.transfers.append(result)
            agents.command(t.src, cmd="send", dst=t.dst, msg_id=t.msg_id, bytes=t.size)

    start_due(begin)
    pending = {(t.src, t.dst, t.msg_id) for t in phase}
    while pending:
        message = agents.next(min(deadline, begin + waiting[0].start_s) if waiting
                              else deadline)
        start_due(time.monotonic())
        if message is None:
            if time.monotonic() >= deadline:
                return False
            continue  # woken to start a transfer
        kind = message["event"]
        if kind == "delivered":
            key = (message["src"], message["agent"], message["msg_id"])
            if key in results:
                results[key].delivered = message["t"]
                results[key].verified = bool(message["verified"])
        elif kind == "completed":
            key = (message["agent"], message["dst"], message["msg_id"])
            if key in results:
                results[key].completed = message["t"]
        elif kind == "qp_error":
            run.aborted = {"t": round(message["t"] - run.start, 4), "src": message["agent"],
                           "dst": message["dst"], "qp": message["qp"]}
            return False
        elif kind in ("error", "exited"):
            raise RuntimeError(f"agent h{message['agent']}: {message.get('message', message)}")
        else:
            continue
        if key in pending and results[key].delivered and results[key].completed:
            pending.discard(key)
    return True
