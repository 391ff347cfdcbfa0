"""The experiment runner: a scenario on a built fabric, its summary, plots and report.

It works inside the run's lifecycle (experiments/run/lifecycle.py), which holds the lock,
made the results folder and tears everything down on every exit path. The results
folder gets `summary.json` and `topology.json` (the resolved topology: ports, MACs,
uSIDs; topologies/resolved.py), and the last line printed is `results: <folder>`.

A scenario with faults is played twice on the same network: with its faults, then
without them (`fault_free` in summary.json, the agents' files in `fault-free/`), so
that each transport is measured against its own fault-free run (`slowdown`): a
baseline that is slower without faults too is not flattered or blamed for it.

The RoCE transports run on the single-plane twin of the fabric (experiments/dataplanes/twin.py)
unless named `@planes`: the run brings up the multi-plane fabric for the MRC
transports, plays both passes there, then the twin for the RoCE ones, under the same
faults mapped onto it; each transport's block says which fabric it ran on
(`fabric`), and summary.json lists both (`fabrics`).

Where the data plane counts (the eBPF switch program on the kernel, the P4 program on
BMv2), each transport's block gets what the switch ports counted while it ran
(`switch_counters`: TRIM_PKTS, ECN-marked, dropped, PFC pauses... summed over
host-facing and over fabric ports), and the summary every port's counters at the end
(`port_counters`).
"""

from __future__ import annotations

import json
import time
from datetime import datetime

from experiments.analysis.health import emulation
from experiments.analysis.metrics import workload_ok
from experiments.analysis.plots import fct_cdf_plot, flows_plot, goodput_plot, path_state_plot
from experiments.analysis.report import write_report
from experiments.analysis.similarity import agents_lag_p99_ms, delay_emulated, proportions
from experiments.analysis.slowdown import describe, slowdowns, verdict
from experiments.dataplanes.twin import by_fabric, twin_steps
from experiments.run import timescale
from experiments.run.checks import check_paths
from experiments.run.lifecycle import Progress, Run
from experiments.run.play import Pass, play_pass
from experiments.scenarios.scenario import Scenario
from topologies.model import Fabric

MAX_FAILED_LISTED = 50
FAULT_FREE = "fault-free"  # the second pass's label and results subfolder


def run_experiment(run: Run, scenario: Scenario, fault_free: bool = True,
                   time_mode: str = "auto") -> None:
    """Run one experiment in `run` (prepared, not entered yet): its status, summary.json
    and, for a workload, report.md. `fault_free` (the default) plays a scenario with
    faults a second time without them (run_workload). `time_mode` fits the scenario to
    links slower than the topology's (experiments/run/timescale.py)."""
    fabric = run.fabric
    scenario = timescale.fit(scenario, fabric, run.rate_share, time_mode)
    spec = fabric.spec
    summary: dict = {
        "topology": fabric.name,
        "topology_file": spec.source,
        "scenario": scenario.name,
        "dataplane": run.target.name,
        "dataplane_reason": run.reason,
        "hosts": len(fabric.hosts),
        "switches": len(fabric.switches),
        "links": len(fabric.links),
        "planes": spec.planes,
        "started_at": datetime.now().isoformat(timespec="seconds"),
        "ok": False,
    }
    with run:
        for note in scenario.resolved:
            run.progress(f"by role: {note}")
        if scenario.resolved:
            summary["scenario_resolved"] = list(scenario.resolved)
        if scenario.workload == "pathcheck":
            network = run.up(fabric)
            run.status = run_pathcheck(network.net, fabric, scenario, summary, run.progress)
        else:
            checked = 0
            if scenario.check_paths:
                network = run.up(fabric, scenario.faults)
                checked = run_pathcheck(network.net, fabric, scenario, summary, run.progress)
            run.status = max(checked, run_workload(run, scenario, summary, fault_free))
            summary["ok"] = summary["ok"] and not checked
    fabrics = run.facts["fabrics"]
    if fabrics:  # the first is the run's own fabric
        first = fabrics[0]
        summary.update(link_emulation=first["link_emulation"],
                       table_writes=first["table_writes"], bringup_s=first["bringup_s"])
        if "port_counters" in first:
            summary["port_counters"] = first["port_counters"]
        if "servers" in first:  # a fabric split across servers (topologies/placement.py)
            summary["servers"] = first["servers"]
    if len(fabrics) > 1:
        summary["fabrics"] = fabrics
    summary.update({k: v for k, v in run.facts.items() if k != "fabrics"})
    if run.error:
        summary["error"] = run.error
    summary["duration_s"] = round(time.monotonic() - run.progress.start, 3)
    (run.folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if scenario.workload != "pathcheck":
        write_report(run.folder / "report.md", summary)
        if "slowdown" in summary:
            trusted = summary.get("emulation", {}).get("trustworthy", True)
            run.progress(verdict(summary["slowdown"], trusted))
            run.progress(f"report: {run.folder / 'report.md'}; plots: goodput.png, "
                         "fct_cdf.png, path_states.png, flows.png beside it")


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


def proportions_of(fabric: Fabric, scenario: Scenario, netem: bool, blocks: list[dict]
                   ) -> dict:
    """The run's proportions (experiments/analysis/similarity.py) on its own fabric, with the
    agents' worst loop lag (p99) of the MRC transports."""
    return proportions(fabric, scenario.protocol, scenario.faults, scenario.plan,
                       delay_emulated(fabric, netem), agents_lag_p99_ms(blocks))


def run_workload(run: Run, scenario: Scenario, summary: dict, fault_free: bool = True) -> int:
    """Play the workload once per transport under the faults and, when there are faults
    and `fault_free`, once more without them: each transport's slowdown is its time
    under the faults against its own fault-free run. Each group of transports plays on
    its fabric (the RoCE ones on the single-plane twin). The run is ok when MRC lost
    nothing in either pass and every fault was applied."""
    plan, progress, folder = scenario.plan, run.progress, run.folder
    summary["scenario_description"] = scenario.description
    summary["workload"] = {"name": scenario.workload, "params": scenario.params,
                           "phases": len(plan), "transfers": sum(map(len, plan)),
                           "bytes": sum(t.size for p in plan for t in p),
                           "data_scale": scenario.data_scale,
                           "time_dilation": scenario.time_dilation}
    fitted = timescale.note(scenario)
    if fitted:
        summary["workload"]["fit"] = fitted
        progress(fitted)
    faulty, clean = Pass(), Pass() if scenario.faults and fault_free else None
    for fabric, transports in by_fabric(scenario.transports, run.fabric):
        steps, left_out = twin_steps(scenario.faults, run.fabric, fabric)
        for note in left_out:
            progress(f"{', '.join(transports)} on {fabric.name}: {note}")
            summary.setdefault("faults_left_out", []).append(note)
        network = run.up(fabric, steps)
        if fabric is not run.fabric:
            progress(f"{', '.join(transports)} on {fabric.name}, the single-plane twin: one "
                     f"port per host at {fabric.spec.host_t0.rate_mbit:g} Mbit/s")
        faulty.add(play_pass(network, transports, plan, steps, folder,
                             scenario.timeout_s, scenario.protocol, progress))
        if clean is not None:
            progress("the same workload without faults, for each transport's slowdown")
            clean.add(play_pass(network, transports, plan, (), folder / FAULT_FREE,
                                scenario.timeout_s, scenario.protocol, progress,
                                label=FAULT_FREE))
    faulty.order(scenario.transports)
    summary["similarity"] = proportions_of(run.fabric, scenario, network.features.netem,
                                           faulty.blocks)
    summary["emulation"] = emulation(faulty.blocks + (clean.blocks if clean else []),
                                     summary["similarity"]["base_rtt_ms"])
    run.progress(summary["emulation"]["headline"])
    summary["transports"] = faulty.blocks
    summary["faults"] = faulty.runs[0].faults if faulty.runs else []
    if clean is not None:
        clean.order(scenario.transports)
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
