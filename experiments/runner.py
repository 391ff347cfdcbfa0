"""The experiment runner: build -> program -> run the scenario -> collect -> tear down.

It takes what the pre-flight (experiments/__main__.py) prepared: the fabric, the
scenario checked against it (`load_scenario`), and the data-plane target. Everything
the run creates is torn down in `finally`, also on Ctrl-C and SIGTERM; a run killed
with SIGKILL is cleaned up by the next one (or `make clean-net`). The results folder
gets `summary.json` and `topology.json` (the resolved topology: ports, MACs, uSIDs;
topologies/resolved.py), and the last line printed is `results: <folder>`.

A scenario with faults is played twice on the same network: with its faults, then
without them (`fault_free` in summary.json, the agents' files in `fault-free/`), so
that each transport is measured against its own fault-free run (`slowdown`): a
baseline that is slower without faults too is not flattered or blamed for it.

Where the eBPF switch program runs (experiments/ebpf_switch.py), each transport's block
gets what the switch ports counted while it ran (`switch_counters`: trimmed, ECN-marked,
dropped... summed over host-facing and over fabric ports), and the summary every
port's counters at the end (`ebpf_counters`), as the P4 switch has its counters.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from experiments import ebpf_switch
from experiments.bringup import bring_up, tear_down
from experiments.capture import start_capture
from experiments.checks import check_paths
from experiments.cleanup import cleanup
from experiments.fabric_lock import FabricLock
from experiments.metrics import workload_ok
from experiments.play import play_pass
from experiments.plots import fct_cdf_plot, flows_plot, goodput_plot, path_state_plot
from experiments.report import write_report
from experiments.scenario import Scenario, scale_note
from experiments.slowdown import describe, slowdowns
from experiments.targets import Target
from topologies.model import Fabric
from topologies.resolved import write_resolved_topology

MAX_FAILED_LISTED = 50
FAULT_FREE = "fault-free"  # the second pass's label and results subfolder


class Interrupted(Exception):
    """SIGTERM or SIGHUP arrived; handled like Ctrl-C."""


class Progress:
    """Progress lines with the time since the run started."""

    def __init__(self, stream=sys.stdout):
        self.start = time.monotonic()
        self.stream = stream

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f}s] {message}", file=self.stream, flush=True)


def results_folder(root: Path, fabric: Fabric, name: str) -> Path:
    """A new folder `<stamp>-<topology>-<name>` under `root` (name: the scenario's)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = root / f"{stamp}-{fabric.name}-{name}"
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = Path(f"{base}-{n}")
    folder.mkdir(parents=True)
    return folder


def raise_interrupted(signum, frame) -> None:
    """A signal handler: SIGTERM and SIGHUP end a run as Ctrl-C does."""
    raise Interrupted(signal.Signals(signum).name)


def run_experiment(fabric: Fabric, target: Target, reason: str, scenario: Scenario,
                   results_root: Path, progress: Progress | None = None,
                   capture: str | None = None, lock: FabricLock | None = None,
                   fault_free: bool = True) -> tuple[int, Path]:
    """Run one experiment on a created target; returns (exit status, results folder).

    `capture` (a spec of experiments/capture.py) records pcaps of those ports into the
    results folder; `lock`, the machine's fabric lock the caller holds, is told the
    folder so that a second run can name it. `fault_free` (the default) plays a
    scenario with faults a second time without them (run_workload)."""
    progress = progress or Progress()
    if lock is not None and lock.stale is not None:
        progress(f"took over the lock of a run that died: {lock.stale.describe()}")
    dataplane = target.name
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupted)
    found = cleanup()
    if found:
        progress(f"removed leftovers of an earlier run: {found.describe()}")
    folder = results_folder(results_root, fabric, scenario.name)
    if lock is not None:
        lock.set_folder(folder)
    spec = fabric.spec
    summary: dict = {
        "topology": fabric.name,
        "topology_file": spec.source,
        "scenario": scenario.name,
        "dataplane": dataplane,
        "dataplane_reason": reason,
        "hosts": len(fabric.hosts),
        "switches": len(fabric.switches),
        "links": len(fabric.links),
        "planes": spec.planes,
        "started_at": datetime.now().isoformat(timespec="seconds"),
        "ok": False,
    }
    progress(f"data plane: {dataplane} ({reason})")
    status, net, pcaps = 1, None, None
    try:
        progress(f"building {fabric.name}: {len(fabric.hosts)} hosts, "
                 f"{len(fabric.switches)} switches, {len(fabric.links)} links")
        network = bring_up(fabric, target, progress)
        net = network.net
        summary["link_emulation"] = network.link_emulation()
        summary["table_writes"] = network.table_writes
        summary.update(target.summary_fields())
        summary["bringup_s"] = network.bringup_s
        progress(f"network up in {summary['bringup_s']:.1f}s, "
                 f"{summary['table_writes']} table writes")
        if network.ebpf.available:
            ebpf_switch.prepare_faults(net, fabric, scenario.faults)
        write_resolved_topology(folder / "topology.json", fabric, dataplane)
        if capture is not None:
            pcaps = start_capture(net, fabric, capture, folder)
            progress(f"capturing {len(pcaps.targets)} ports into {folder / 'pcap'}")
        if scenario.workload == "pathcheck":
            status = run_pathcheck(net, fabric, scenario, summary, progress)
        else:
            status = run_workload(net, fabric, target, scenario, folder, summary, progress,
                                      fault_free)
    except (KeyboardInterrupt, Interrupted) as stop:
        progress(f"interrupted ({stop or 'Ctrl-C'}): tearing down")
        summary["error"] = "interrupted"
        status = 130
    except Exception as err:  # noqa: BLE001 - reported in one line, the run still tears down
        progress(f"error: {err.__class__.__name__}: {err}")
        summary["error"] = f"{err.__class__.__name__}: {err}"
        status = 1
    finally:
        with ctrl_c_held():
            if pcaps is not None:  # before the teardown, so every tcpdump can flush
                try:
                    summary["captures"] = [r.as_dict() for r in pcaps.stop()]
                except Exception as err:  # noqa: BLE001 - reported; cleanup() ends tcpdump
                    progress(f"capture: {err.__class__.__name__} {err}")
            if net is not None and net.ebpf_ports:
                try:
                    summary["ebpf_counters"] = ebpf_switch.read_counters(net)
                except Exception as err:  # noqa: BLE001 - reported; the teardown goes on
                    progress(f"eBPF counters: {err.__class__.__name__} {err}")
            tear_down_all(net, progress)
        if net is not None:
            summary.update(target.summary_fields())  # again: a reboot writes tables too
        summary["duration_s"] = round(time.monotonic() - progress.start, 3)
        (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if scenario.workload != "pathcheck":
            write_report(folder / "report.md", summary)
    return status, folder


@contextmanager
def ctrl_c_held():
    """Ignore Ctrl-C inside: a second Ctrl-C must not cut a teardown short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def tear_down_all(net, progress: Progress) -> None:
    """Stop the network if it was built, then remove whatever is left of it (and of any
    earlier run); a failed stop is reported and cleanup() removes the rest."""
    if net is not None:
        progress("tearing down")
        try:
            tear_down(net)
        except Exception as err:  # noqa: BLE001 - reported; cleanup() removes the rest
            progress(f"teardown: {err.__class__.__name__} {err}; removing leftovers")
    cleanup()


def run_pathcheck(net, fabric: Fabric, scenario: Scenario, summary: dict,
                  progress: Progress) -> int:
    n_pairs = len(fabric.hosts) * (len(fabric.hosts) - 1)
    progress(f"checking every path between {n_pairs} host pairs")
    result = check_paths(net, fabric, copies=scenario.check_copies,
                         timeout_s=scenario.check_wait_s)
    summary.update({
        "paths_checked": result.checked,
        "paths_ok": result.ok,
        "paths_failed": [p.label for p in result.failed[:MAX_FAILED_LISTED]],
        "datagrams_sent": result.datagrams_sent,
        "datagrams_received": result.datagrams_received,
        "check_s": round(result.duration_s, 3),
        "ok": result.all_ok,
    })
    progress(f"paths: {result.ok}/{result.checked} ok in {result.duration_s:.1f}s")
    for path in result.failed[:10]:
        progress(f"  failed: {path.label} ({path.address})")
    return 0 if result.all_ok else 1


def run_workload(net, fabric: Fabric, target: Target, scenario: Scenario, folder: Path,
                 summary: dict, progress: Progress, fault_free: bool = True) -> int:
    """Play the workload once per transport under the faults and, when there are faults
    and `fault_free`, once more without them: each transport's slowdown is its time
    under the faults against its own fault-free run. The run is ok when MRC lost
    nothing in either pass and every fault was applied."""
    actions, plan = scenario.faults, scenario.plan
    summary["scenario_description"] = scenario.description
    summary["workload"] = {"name": scenario.workload, "params": scenario.params,
                           "phases": len(plan), "transfers": sum(map(len, plan)),
                           "bytes": sum(t.size for p in plan for t in p),
                           "data_scale": scenario.data_scale}
    if scenario.data_scale < 1.0:
        progress(scale_note(scenario.data_scale))
    faulty = play_pass(net, fabric, target, scenario.transports, plan, actions, folder,
                       scenario.timeout_s, scenario.protocol, progress)
    summary["transports"] = faulty.blocks
    summary["faults"] = faulty.runs[0].faults if faulty.runs else []
    clean = None
    if actions and fault_free:
        progress("the same workload without faults, for each transport's slowdown")
        clean = play_pass(net, fabric, target, scenario.transports, plan, (),
                          folder / FAULT_FREE, scenario.timeout_s, scenario.protocol,
                          progress, label=FAULT_FREE)
        summary["fault_free"] = clean.blocks
        summary["slowdown"] = slowdowns(faulty.blocks, clean.blocks)
        for entry in summary["slowdown"]:
            progress(f"{entry['transport']}: slowdown {describe(entry)}")
    with open(folder / "events.jsonl", "w") as out:
        for transport, evs in faulty.events.items():
            for event in evs:
                out.write(json.dumps(dict(event, transport=transport)) + "\n")
    goodput_plot(folder / "goodput.png", faulty.runs, faulty.events)
    fct_cdf_plot(folder / "fct_cdf.png", faulty.runs)
    path_state_plot(folder / "path_states.png", faulty.runs, faulty.events)
    flows_plot(folder / "flows.png", faulty.runs, faulty.events)
    summary["ok"] = workload_ok(faulty.blocks) and (clean is None or workload_ok(clean.blocks))
    return 0 if summary["ok"] else 1


def require_root() -> None:
    """Fail, before anything is built, when Mininet cannot run."""
    if os.geteuid() != 0:
        raise PermissionError("the run needs root (Mininet creates namespaces and links); "
                              "fix: run it with sudo")
