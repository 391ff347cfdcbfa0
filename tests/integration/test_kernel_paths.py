"""The kernel data plane in Mininet: every path works; a link down fails exactly its paths."""

from __future__ import annotations

from experiments.checks import check_paths
from topologies.network import set_link
from topologies.paths import all_paths


def test_every_path_of_2tier_2plane_works(kernel_network):
    net, fabric = kernel_network
    result = check_paths(net, fabric)
    assert result.checked == len(all_paths(fabric)) == 56
    assert result.ok == result.checked, [p.label for p in result.failed]


def test_link_down_fails_exactly_the_paths_through_it(kernel_network):
    net, fabric = kernel_network
    t0, t1 = fabric.t0(0, 0), fabric.t1(0, 1)
    through = {
        (p.src, p.dst, p.ev) for p in all_paths(fabric)
        if any({a, b} == {t0.usid, t1.usid} for a, b in zip(p.usids, p.usids[1:]))
    }
    assert through  # the link carries cross-rack and hairpin paths in both directions
    set_link(net, t0.name, t1.name, up=False)
    try:
        result = check_paths(net, fabric, timeout_s=1.0)
    finally:
        set_link(net, t0.name, t1.name, up=True)
    assert {(p.src, p.dst, p.ev) for p in result.failed} == through
    assert result.ok == result.checked - len(through)
    assert check_paths(net, fabric).all_ok  # and all is well once it is back up
