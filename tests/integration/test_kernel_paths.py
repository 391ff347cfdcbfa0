"""The kernel data plane in Mininet: every path works; a link down fails exactly its paths."""

from __future__ import annotations

from experiments.dataplanes.targets import apply_fault
from experiments.run.checks import check_paths
from tests.steps import step
from topologies.network import set_link
from topologies.paths import all_paths


def admin_up(intf) -> bool:
    """The interface's administrative state, as its own namespace's kernel reports it."""
    line = intf.node.cmd(f"ip -o link show dev {intf.name}")
    flags = line.split("<", 1)[1].split(">", 1)[0].split(",")
    return "UP" in flags


def test_every_path_of_2tier_2plane_works(kernel_network):
    net, fabric = kernel_network.net, kernel_network.fabric
    result = check_paths(net, fabric)
    assert result.checked == len(all_paths(fabric)) == 56
    assert result.ok == result.checked, [p.label for p in result.failed]


def test_link_down_fails_exactly_the_paths_through_it(kernel_network):
    net, fabric = kernel_network.net, kernel_network.fabric
    t0, t1 = fabric.t0(0, 0), fabric.t1(0, 1)
    through = {
        (p.src, p.dst, p.ev) for p in all_paths(fabric)
        if any({a, b} == {t0.usid, t1.usid} for a, b in zip(p.usids, p.usids[1:]))
    }
    assert through  # the link carries cross-rack and hairpin paths in both directions
    (link,) = net.linksBetween(net.get(t0.name), net.get(t1.name))
    ends = (link.intf1, link.intf2)
    set_link(net, t0.name, t1.name, up=False)
    try:
        # Both ends are down at once (netlink, no shell command in between).
        assert [admin_up(intf) for intf in ends] == [False, False]
        result = check_paths(net, fabric, timeout_s=1.0)
    finally:
        set_link(net, t0.name, t1.name, up=True)
    assert [admin_up(intf) for intf in ends] == [True, True]
    assert {(p.src, p.dst, p.ev) for p in result.failed} == through
    assert result.ok == result.checked - len(through)
    assert check_paths(net, fabric).all_ok  # and all is well once it is back up


def _through(fabric, usid):
    return {(p.src, p.dst, p.ev) for p in all_paths(fabric) if usid in p.usids}


def _failed(result):
    return {(p.src, p.dst, p.ev) for p in result.failed}


def test_switch_reboot_and_blackhole_fail_the_paths_through_the_switch(kernel_network):
    net, fabric = kernel_network.net, kernel_network.fabric
    switch = fabric.t1(1, 0)
    expected = _through(fabric, switch.usid)
    for kind in ("switch-reboot", "blackhole"):
        apply_fault(kernel_network, step(0, False, kind, (switch.name,)))
        try:
            result = check_paths(net, fabric, timeout_s=1.0)
        finally:
            apply_fault(kernel_network, step(0, True, kind, (switch.name,)))
        assert _failed(result) == expected, kind
        assert check_paths(net, fabric).all_ok, kind


def test_nic_port_down_fails_that_plane_of_the_host(kernel_network):
    net, fabric = kernel_network.net, kernel_network.fabric
    expected = {(p.src, p.dst, p.ev) for p in all_paths(fabric)
                if p.plane == 1 and 2 in (p.src, p.dst)}
    apply_fault(kernel_network, step(0, False, "nic-port-down", ("h2", 1)))
    try:
        result = check_paths(net, fabric, timeout_s=1.0)
    finally:
        apply_fault(kernel_network, step(0, True, "nic-port-down", ("h2", 1)))
    assert _failed(result) == expected
    assert check_paths(net, fabric).all_ok
