"""One pass of a workload on a built network: every transport in turn, each summarised.

A pass plays the same plan (the workload's phases) under the same fault timeline once
per transport (experiments/run/workload_run.py does one transport) and turns each run into
its summary block (experiments/analysis/metrics.py). Where the data plane counts (the eBPF
switch program on the kernel, the P4 program on BMv2), a block also gets what the
switch ports counted during that transport's run (experiments/dataplanes/switch_counters.py).

The runner plays a scenario's pass with its faults and, when it has faults, a second
pass without them, so each transport can be compared with its own fault-free run
(experiments/analysis/slowdown.py); `make paper` plays many passes on one network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from experiments.analysis.metrics import read_events, summarize
from experiments.dataplanes.queue_sampler import QueueSampler
from experiments.dataplanes.switch_counters import counter_totals, total
from experiments.dataplanes.targets import apply_fault
from experiments.faults import Step
from experiments.run.workload_run import TransportRun, run_transport
from experiments.scenarios.workloads import Transfer


@dataclass
class Pass:
    """What one pass produced: per transport its run, its agents' events and its block."""

    runs: list[TransportRun] = field(default_factory=list)
    events: dict[str, list[dict]] = field(default_factory=dict)
    blocks: list[dict] = field(default_factory=list)

    def block(self, transport: str) -> dict:
        return next(b for b in self.blocks if b["transport"] == transport)

    def add(self, other: Pass) -> None:
        """Take in another pass's transports (played on another fabric, say)."""
        self.runs += other.runs
        self.events.update(other.events)
        self.blocks += other.blocks

    def order(self, transports: tuple[str, ...]) -> None:
        """Put the transports in the given order (a scenario's)."""
        self.runs.sort(key=lambda r: transports.index(r.transport))
        self.blocks.sort(key=lambda b: transports.index(b["transport"]))

    def run(self, transport: str) -> TransportRun:
        return next(r for r in self.runs if r.transport == transport)


def play_pass(running, transports: tuple[str, ...],
              plan: tuple[tuple[Transfer, ...], ...], steps: tuple[Step, ...],
              folder: Path, timeout_s: float, protocol: dict, progress,
              label: str = "", queue: tuple[str, str] | None = None) -> Pass:
    """Play `plan` under the fault `steps` once per transport on the running fabric
    (`running`: experiments/run/fabric.py RunningFabric, with its target); the agents'
    files go to `folder`.

    `label` is put before each progress line (e.g. "fault-free") so that a reader can
    tell the passes of one run apart. `queue` (a switch and the peer its port faces)
    samples that port's queue through each run into its block's `queue` (eBPF switch
    ports only: experiments/dataplanes/queue_sampler.py)."""
    fabric, target = running.fabric, running.target
    out = Pass()
    prefix = f"{label}: " if label else ""
    transfers = sum(map(len, plan))
    for transport in transports:
        progress(f"{prefix}{transport}: {transfers} transfers in {len(plan)} phases, "
                 f"{len(steps)} fault steps")
        before = target.switch_counters(running)
        pfc = running.pfc  # None where no program carries PFC's pauses out
        pfc_errors = len(pfc.errors) if pfc else 0
        sampler = QueueSampler(running, *queue) if queue else None
        try:
            run = run_transport(running, transport, [list(p) for p in plan], list(steps),
                                lambda step: apply_fault(running, step),
                                folder, timeout_s, protocol, progress)
        finally:
            if sampler:
                sampler.stop()
        events = read_events(run.event_files)
        block = summarize(run, events)
        if sampler:
            block["queue"] = sampler.result(run.start)
        block["fabric"] = {"topology": fabric.name, "planes": fabric.spec.planes,
                           "rate_mbit": fabric.spec.host_t0.rate_mbit}
        if before:
            block["switch_counters"] = counter_totals(fabric, before,
                                                      target.switch_counters(running))
            progress(f"{prefix}{transport}: switch ports "
                     + ", ".join(f"{k} {v}" for k, v in total(block["switch_counters"]).items()
                                 if v))
        progress(f"{prefix}{transport}: {block['transfers_done']}/{block['transfers']} "
                 f"transfers done in {block['workload_s']:.2f}s, "
                 f"{block['goodput_mbps']:.1f} Mbit/s, "
                 f"{block['path_events'].get('retire', 0)} paths retired")
        for error in block["fault_errors"]:
            progress(f"{prefix}{transport}: a fault failed to apply: {error}")
        # A pause or resume not carried out leaves a port's lossless traffic held.
        block["pfc_errors"] = pfc.errors[pfc_errors:] if pfc else []
        for error in block["pfc_errors"]:
            progress(f"{prefix}{transport}: a PFC pause or resume failed: {error}")
        out.runs.append(run)
        out.events[transport] = events
        out.blocks.append(block)
    return out

