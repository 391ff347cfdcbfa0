"""The BMv2 data plane in Mininet: 2tier-2plane on eight simple_switch_grpc switches.

The same path check as the kernel target; a switch reboot fails exactly the paths
through the switch and brings them back with the same entries written again (one more
write batch); the blackhole fault; link flaps, again and again (a BMv2 switch must
keep every port working through them); and an MRC transfer over the P4 switches, byte
for byte, while a link flaps. Skipped with the reason where BMv2 or p4c is missing.
"""

from __future__ import annotations

from experiments.analysis.metrics import read_events
from experiments.faults import parse_faults
from experiments.run.checks import check_paths
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from tests.steps import step
from topologies.paths import all_paths


def _through(fabric, usid):
    return {(p.src, p.dst, p.ev) for p in all_paths(fabric) if usid in p.usids}


def test_every_path_works_and_each_switch_got_one_write_batch(bmv2_network):
    check_programmed_and_forwarding(*bmv2_network)


def check_programmed_and_forwarding(network, target) -> None:
    """2tier-2plane on BMv2 up: every path delivers, each switch got its tables in one
    write batch, and every switch port counted what it forwarded."""
    fabric = network.fabric
    result = check_paths(network.net, fabric)
    assert result.checked == len(all_paths(fabric)) == 56
    assert result.ok == result.checked, [p.label for p in result.failed]
    # 4 T0 x (1 + 4 routes + 2 x 4 ports + 8 classes) + 4 T1 x (1 + 2 + 2 x 2 + 8), in
    # one WriteRequest per switch.
    assert network.table_writes == 4 * 21 + 4 * 15 == 144
    assert target.write_batches == len(fabric.switches) == 8
    # Every path crossed every port of its switches: each port counted what it forwarded.
    counters = target.switch_counters(network)
    quiet = [(s.name, p.intf) for s in fabric.switches for p in fabric.ports(s.name)
             if counters[s.name][p.intf].get("forwarded", 0) == 0]
    assert not quiet, quiet


def test_switch_reboot_and_blackhole_fail_exactly_the_paths_through_the_switch(bmv2_network):
    from experiments.dataplanes.targets import apply_fault

    network, target = bmv2_network
    net, fabric = network.net, network.fabric
    switch = fabric.t1(1, 0)
    expected = _through(fabric, switch.usid)
    for kind in ("switch-reboot", "blackhole"):
        batches = target.write_batches
        apply_fault(network, step(0, False, kind, (switch.name,)))
        try:
            result = check_paths(net, fabric, timeout_s=1.0)
        finally:
            apply_fault(network, step(0, True, kind, (switch.name,)))
        assert {(p.src, p.dst, p.ev) for p in result.failed} == expected, kind
        assert check_paths(net, fabric).all_ok, kind
        # A reboot writes the same entries once more; a blackhole writes nothing.
        assert target.write_batches == batches + (kind == "switch-reboot"), kind


def test_link_flaps_fail_exactly_the_paths_over_the_link_and_leave_no_trace(bmv2_network):
    network, target = bmv2_network
    net, fabric = network.net, network.fabric
    t0, t1 = fabric.t0(0, 0), fabric.t1(0, 0)
    through = {
        (p.src, p.dst, p.ev) for p in all_paths(fabric)
        if any({a, b} == {t0.usid, t1.usid} for a, b in zip(p.usids, p.usids[1:]))
    }
    for _ in range(5):
        target.set_link(net, t0.name, t1.name, up=False)
        try:
            result = check_paths(net, fabric, timeout_s=1.0)
        finally:
            target.set_link(net, t0.name, t1.name, up=True)
        assert {(p.src, p.dst, p.ev) for p in result.failed} == through
    # A host's link too: the host end goes down, as its NIC port would.
    for _ in range(5):
        target.set_link(net, "h0", t0.name, up=False)
        target.set_link(net, "h0", t0.name, up=True)
    assert check_paths(net, fabric).all_ok


def test_mrc_transfer_over_the_p4_switches_survives_a_flapping_link(bmv2_network, tmp_path):
    from experiments.dataplanes.targets import apply_fault

    network, _ = bmv2_network
    fabric = network.fabric
    actions = parse_faults([{"kind": "link-flap", "link": ["p0t0r0", "p0t1s0"], "at_s": 0.1,
                             "down_s": 0.3, "count": 2, "every_s": 0.5}], fabric)
    plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": 2_000_000}, fabric)
    run = run_transport(network, "mrc", plan, actions, lambda a: apply_fault(network, a),
                        tmp_path, 60.0, {}, print)
    (result,) = run.transfers
    assert result.done and result.verified
    retired = [e for e in read_events(run.event_files) if e["event"] == "retire"]
    assert retired and (retired[0]["plane"], retired[0]["path"]) == (0, 0)
