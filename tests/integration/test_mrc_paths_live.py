"""MRC's paths on a running kernel fabric (2tier-2plane, the eBPF switch, Mininet, root):
traffic between two hosts of one rack turns at their T0 and crosses no T1 (the switch
ports' own counters), and no shipped scenario's workload retires a path when nothing
is broken (the fault-free pass every run makes for its slowdowns).
Skipped with the reason where the eBPF program cannot run.
"""

from __future__ import annotations

import pytest

from experiments.analysis.metrics import read_events, summarize
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.targets import apply_fault
from experiments.run.workload_run import run_transport
from experiments.scenarios.scenario import ScenarioError, available_scenarios, load_scenario
from experiments.scenarios.workloads import phases


def forwarded(counters: dict, tier: str) -> int:
    """Packets the ports of one tier's switches (t0, t1) forwarded."""
    return sum(port.get("forwarded", 0) for switch, ports in counters.items()
               if tier in switch for port in ports.values())


def play(network, plan, folder, protocol=None) -> tuple[dict, list[dict]]:
    run = run_transport(network, "mrc", plan, [], lambda a: apply_fault(network, a),
                        folder, 60.0, protocol or {}, print)
    events = read_events(run.event_files)
    return summarize(run, events), events


def test_same_rack_traffic_crosses_no_t1(fabric_with_ebpf, tmp_path):
    fabric = fabric_with_ebpf.fabric
    src, dst = fabric.hosts[0], fabric.hosts[1]
    assert src.rack == dst.rack
    before = ebpf_switch.read_counters(fabric_with_ebpf)
    plan = phases("transfer", {"src": src.index, "dst": dst.index,
                               "message_bytes": 2_000_000}, fabric)
    block, _ = play(fabric_with_ebpf, plan, tmp_path)
    after = ebpf_switch.read_counters(fabric_with_ebpf)
    assert block["ok"] and block["verified"], block
    at_t0 = forwarded(after, "t0") - forwarded(before, "t0")
    at_t1 = forwarded(after, "t1") - forwarded(before, "t1")
    # The data alone (acknowledgements add to it, fewer when a busy agent groups
    # more of them into one SACK).
    assert at_t0 > 2_000_000 // 1200
    # The T1s' counters take every packet of the run, the agents' control packets
    # included (a handful: 14 in one run here); a detour over the T1s would put
    # thousands of the data's packets there (80% of them before rack-local paths).
    assert at_t1 <= 0.01 * at_t0, (at_t1, at_t0)


SHIPPED = [name for name in available_scenarios() if name != "pathcheck"]


@pytest.mark.parametrize("name", SHIPPED)
def test_a_fault_free_pass_retires_no_path(fabric_with_ebpf, tmp_path, name):
    fabric = fabric_with_ebpf.fabric
    try:
        scenario = load_scenario(name, fabric)
    except ScenarioError as err:
        pytest.skip(f"{name} does not apply to {fabric.name}: {err}")
    if "mrc" not in scenario.transports:
        pytest.skip(f"{name} does not run mrc")
    block, events = play(fabric_with_ebpf, [list(p) for p in scenario.plan], tmp_path,
                         scenario.protocol)
    assert block["ok"] and block["verified"], block
    retired = [e for e in events if e["event"] == "retire"]
    assert not retired, "; ".join(
        f"h{e.get('host')}->h{e['peer']} plane {e['plane']} path {e.get('path')}: {e['reason']}"
        for e in retired[:5])
