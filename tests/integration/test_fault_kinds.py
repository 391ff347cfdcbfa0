"""The fault kinds switch-down, link-down (both ways and one way), links-fail and faults in
place before the start, played on a running kernel fabric (2tier-2plane, Mininet, root)
under real transfers: each changes what is measured.

- a one-way cut of p0t0r0 -> p0t1s0 drops what the T0 sends into it while the T1's
  direction still forwards, both ends keep their carrier, MRC retires the path h0 -> h3
  over it, and the baseline, whose routing hears nothing, keeps losing packets in it;
- a T0 down takes the carrier of its hosts' ports on that plane, MRC moves to the other
  plane, and the T0 comes back with its tables;
- a link down before the start is down when the first packet is sent: nothing crosses
  it during the whole run, and the log records it at t=0;
- links-fail, from a scenario file: its links go down one after another, as the fault
  log shows, and come back when the run ends.
The tests that cut one way or read the ports' counters need the eBPF switch program:
skipped with the reason where it cannot run.
"""

from __future__ import annotations

import time
from dataclasses import replace

import yaml

from experiments.analysis.metrics import read_events
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.targets import apply_fault
from experiments.faults import parse_faults
from experiments.run.workload_run import run_transport
from experiments.scenarios.scenario import load_scenario
from experiments.scenarios.workloads import phases

TRANSFER = {"src": 0, "dst": 3, "message_bytes": 2_000_000}


def play(network, transport, faults, folder, timeout_s=30.0, params=TRANSFER):
    """One transport run of a transfer h0 -> h3 under `faults` (scenario entries) on the
    running fabric: the run, its events, and what every eBPF port counted meanwhile
    (node -> intf -> ...)."""
    fabric = network.fabric
    actions = parse_faults(faults, fabric)
    plan = phases("transfer", params, fabric)
    before = ebpf_switch.read_counters(network) if network.ebpf_ports.ports else {}
    run = run_transport(network, transport, plan, actions,
                        lambda a: apply_fault(network, a), folder, timeout_s, {}, print)
    after = ebpf_switch.read_counters(network) if network.ebpf_ports.ports else {}
    counted = {node: {intf: {k: v - before.get(node, {}).get(intf, {}).get(k, 0)
                             for k, v in counters.items()}
                      for intf, counters in ports.items()}
               for node, ports in after.items()}
    return run, read_events(run.event_files), counted


def routes(net, node: str) -> list[str]:
    return sorted(net.get(node).cmd("ip -6 route show table all proto boot").splitlines())


def carrier(net, node: str, intf: str) -> str:
    return net.get(node).cmd(f"cat /sys/class/net/{intf}/carrier").strip()


ONE_WAY = {"kind": "link-down", "link": ["p0t0r0", "p0t1s0"], "from": "p0t0r0", "at_s": 0}
UPLINK, DOWNLINK = ("p0t0r0", "p0t0r0-eth2"), ("p0t1s0", "p0t1s0-eth0")  # the two ends


def test_a_one_way_cut_leaves_both_ends_their_carrier(fabric_with_ebpf):
    net, fabric = fabric_with_ebpf.net, fabric_with_ebpf.fabric
    (down,) = parse_faults([ONE_WAY], fabric)
    apply_fault(fabric_with_ebpf, down)
    try:
        assert carrier(net, *UPLINK) == carrier(net, *DOWNLINK) == "1"
    finally:
        apply_fault(fabric_with_ebpf, replace(down, up=True))
    assert carrier(net, *UPLINK) == carrier(net, *DOWNLINK) == "1"


def test_a_one_way_cut_retires_mrcs_path_and_costs_the_baseline_packets(fabric_with_ebpf, tmp_path):
    run, events, counted = play(fabric_with_ebpf, "mrc", [ONE_WAY], tmp_path / "mrc")
    assert run.ok and not run.fault_errors, run
    retired = {(e["plane"], e["path"]) for e in events
               if e["event"] == "retire" and e["host"] == 0 and e["peer"] == 3}
    assert (0, 0) in retired, retired  # plane 0, spine 0: over the cut link
    assert counted[UPLINK[0]][UPLINK[1]]["fault_dropped"] > 0
    # The other direction of the same link carried h3's acks to h0, and lost none.
    assert counted[DOWNLINK[0]][DOWNLINK[1]]["forwarded"] > 0
    assert counted[DOWNLINK[0]][DOWNLINK[1]]["fault_dropped"] == 0

    # The baseline's routing hears nothing of a one-way cut: no route event, and the
    # queue pairs hashed onto it keep sending into it (roce-8: 8 QPs on 4 paths).
    run, events, counted = play(fabric_with_ebpf, "roce-8", [ONE_WAY], tmp_path / "roce",
                                timeout_s=4.0)
    assert not run.fault_errors
    assert not [e for e in events if e["event"] in ("route", "reroute")]
    assert counted[UPLINK[0]][UPLINK[1]]["fault_dropped"] > 0
    # Those queue pairs time out again and again on plane 0 and the message never
    # completes: routing would have to tell the sender, and it cannot see the cut.
    stuck = [e for e in events if e["event"] == "timeout" and e["host"] == 0]
    assert stuck and {e["plane"] for e in stuck} == {0}
    assert not run.ok


def test_a_t0_down_kills_its_hosts_ports_on_the_plane_until_it_is_back(kernel_network,
                                                                      tmp_path):
    net, fabric = kernel_network.net, kernel_network.fabric
    tables = routes(net, "p0t0r0")
    assert len(tables) > 4
    seen = []

    def apply(action):
        apply_fault(kernel_network, action)
        seen.append((action.up, carrier(net, "h0", "h0-eth0"), carrier(net, "h1", "h1-eth0"),
                     carrier(net, "h0", "h0-eth1")))

    actions = parse_faults([{"kind": "switch-down", "switch": "p0t0r0", "at_s": 0.2,
                             "down_s": 1.5}], fabric)
    plan = phases("transfer", dict(TRANSFER, message_bytes=4_000_000), fabric)
    run = run_transport(kernel_network, "mrc", plan, actions, apply, tmp_path, 30.0, {},
                        print)
    events = read_events(run.event_files)
    assert run.ok and not run.fault_errors, run
    # Down: both hosts of rack 0 lost their plane-0 port, the plane-1 port stayed.
    assert seen[0] == (False, "0", "0", "1"), seen
    assert seen[1] == (True, "1", "1", "1"), seen
    assert [e for e in events if e["event"] == "local-plane-down" and e["host"] == 0]
    # The T0 came back with every route it had.
    assert routes(net, "p0t0r0") == tables


def test_a_link_down_before_the_start_carries_nothing_of_the_run(fabric_with_ebpf, tmp_path):
    net, fabric = fabric_with_ebpf.net, fabric_with_ebpf.fabric
    (early,) = parse_faults([{"kind": "link-down", "link": ["p0t0r0", "p0t1s0"],
                              "before_start": True}], fabric)
    counters, when = {}, {}

    def apply(action):
        # Read the ports once the link is down (a kernel may send one last packet, such
        # as an MLD report, as its port goes down) and just before the run restores
        # it: what the run sent in between.
        when[action.up] = time.time()
        if action.up:
            counters["down"] = ebpf_switch.read_counters(fabric_with_ebpf)
        apply_fault(fabric_with_ebpf, action)
        if not action.up:
            counters["before"] = ebpf_switch.read_counters(fabric_with_ebpf)

    plan = phases("transfer", TRANSFER, fabric)
    run = run_transport(fabric_with_ebpf, "mrc", plan, [early], apply, tmp_path, 30.0, {},
                        print)
    assert run.ok and not run.fault_errors, run
    # Down before the agents were even configured.
    assert when[False] < (tmp_path / "agents" / "h0.json").stat().st_mtime
    assert run.faults[0] == {"t": 0.0, "event": "fault", "fault": "link-down",
                             "target": ["p0t0r0", "p0t1s0"], "up": False,
                             "before_start": True}
    # From the first packet on, nothing went into the link either way; the run did
    # move its data (over the three other paths).
    before, down = counters["before"], counters["down"]
    for node, intf in (UPLINK, DOWNLINK):
        assert down[node][intf]["forwarded"] == before[node][intf]["forwarded"], (node, intf)
    moved = sum(down["p0t0r0"][i]["forwarded"] - before["p0t0r0"][i]["forwarded"]
                for i in down["p0t0r0"])
    assert moved > 100
    # The run restored it.
    assert carrier(net, *UPLINK) == carrier(net, *DOWNLINK) == "1"


def test_links_fail_from_a_scenario_file(kernel_network, tmp_path):
    net, fabric = kernel_network.net, kernel_network.fabric
    path = tmp_path / "links.yaml"
    path.write_text(yaml.safe_dump({
        "name": "links", "workload": "transfer", "transports": ["mrc"], "timeout_s": 30,
        "params": {"src": 0, "dst": 3, "message_bytes": 6_000_000},
        "faults": [{"kind": "links-fail", "count": 4, "at_s": 0.05, "every_s": 0.1,
                    "seed": 5}]}))
    scenario = load_scenario(str(path), fabric)
    run = run_transport(kernel_network, "mrc", [list(p) for p in scenario.plan],
                        list(scenario.faults), lambda a: apply_fault(kernel_network, a),
                        tmp_path / "run", scenario.timeout_s, {}, print)
    assert run.ok and not run.fault_errors, run
    faults = run.faults
    assert [f["fault"] for f in faults] == ["link-down"] * 4
    assert [f["up"] for f in faults] == [False] * 4
    assert len({tuple(f["target"]) for f in faults}) == 4
    times = [f["t"] for f in faults]
    assert times == sorted(times) and 0.25 <= times[-1] - times[0] < 0.6
    events = read_events(run.event_files)
    assert [e for e in events if e["event"] == "retire"]
    # The run brought the four links back.
    for a, b in (f["target"] for f in faults):
        assert carrier(net, a, next(p.intf for p in fabric.ports(a) if p.peer == b)) == "1"
