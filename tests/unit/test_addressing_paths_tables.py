"""Addressing, the path catalogue and the static tables, checked against hand-made values."""

from __future__ import annotations

import itertools

import pytest

from controller.kernel import commands_for_intf, switch_commands
from controller.tables import all_tables
from hosts import protocol
from hosts.protocol import EV_CHOICE_MASK, ev_plane, make_ev
from topologies import addressing as a
from topologies.model import load_topology
from topologies.paths import all_paths, catalogue, path_for_ev


@pytest.fixture(scope="module")
def small():
    return load_topology("2tier-2plane")


def test_usids_follow_the_rule():
    assert a.t0_usid(3, 1) == 0x1301
    assert a.t1_usid(15, 255) == 0x2FFF
    assert a.host_usid(5) == 0x8005
    assert a.describe_usid(0x2301) == "T1 plane 3 spine 1"
    with pytest.raises(a.AddressingError):
        a.t0_usid(16, 0)  # room for exactly 16 planes
    with pytest.raises(a.AddressingError):
        a.t1_usid(0, 256)


def test_usids_unique_at_the_limits():
    usids = [a.t0_usid(p, r) for p in range(16) for r in range(256)]
    usids += [a.t1_usid(p, s) for p in range(16) for s in range(256)]
    usids += [a.host_usid(h) for h in range(0, a.MAX_HOSTS, 7)]
    assert len(usids) == len(set(usids))


def test_every_node_of_a_topology_has_a_unique_usid_and_macs():
    fabric = load_topology("2tier-8plane")
    nodes = [*fabric.hosts, *fabric.switches]
    assert len({n.usid for n in nodes}) == len(nodes) == 8 + 8 * (2 + 4)
    macs = [p.mac for n in nodes for p in fabric.ports(n.name)]
    assert len(macs) == len(set(macs)) == 2 * len(fabric.links)
    assert all(a.node_usid(n.name) == n.usid for n in nodes)


def test_address_round_trip():
    address = a.usid_address([0x1300, 0x2301, 0x1301, 0x8005])
    assert address == "fcbb:bb00:1300:2301:1301:8005::"
    assert a.parse_usids(address) == [0x1300, 0x2301, 0x1301, 0x8005]
    assert a.usid_prefix(0x2301) == "fcbb:bb00:2301::/48"
    assert a.mac_address("p3t1s1", 4) == "02:00:23:01:00:04"
    with pytest.raises(a.AddressingError):
        a.usid_address([1] * 7)


def test_catalogue_counts(small):
    # different racks: planes x T1; same rack: planes x (direct + T1)
    assert len(catalogue(small, 0, 2)) == 2 * 2
    assert len(catalogue(small, 0, 1)) == 2 * 3
    pairs = list(itertools.permutations(range(4), 2))
    same = sum(1 for s, d in pairs if s // 2 == d // 2)
    assert len(all_paths(small)) == same * 6 + (len(pairs) - same) * 4 == 56
    # 2tier-8plane (4 T1 per plane): 32 cross-rack pairs x 8 planes x 4 spines
    # + 24 same-rack pairs x 8 planes x (direct + 4 spines)
    assert len(all_paths(load_topology("2tier-8plane"))) == 32 * 32 + 24 * 40 == 1984


def test_paths_by_hand(small):
    paths = catalogue(small, 0, 3)  # h0 rack 0 -> h3 rack 1
    assert [p.address for p in paths] == [
        "fcbb:bb00:1000:2000:1001:8003::",
        "fcbb:bb00:1000:2001:1001:8003::",
        "fcbb:bb00:1100:2100:1101:8003::",
        "fcbb:bb00:1100:2101:1101:8003::",
    ]
    direct = catalogue(small, 1, 0)[0]
    assert (direct.address, direct.spine) == ("fcbb:bb00:1000:8000::", None)
    hairpin = catalogue(small, 1, 0)[2]
    assert hairpin.address == "fcbb:bb00:1000:2001:1000:8000::"


def test_any_ev_maps_into_its_plane(small):
    for ev in (0, 1, 2, 99, make_ev(1, EV_CHOICE_MASK)):
        path = path_for_ev(small, 0, 3, ev)
        assert path.plane == ev_plane(ev)
        assert path.usids[0] == small.t0(path.plane, 0).usid
    same = path_for_ev(small, 0, 3, make_ev(1, 5)), path_for_ev(small, 0, 3, make_ev(1, 1))
    assert same[0].usids == same[1].usids
    with pytest.raises(ValueError, match="plane 2"):
        path_for_ev(small, 0, 3, make_ev(2, 0))


def test_tables_by_hand(small):
    tables = all_tables(small)
    t0 = tables["p1t0r0"]
    assert t0.my_usid == 0x1100
    assert [(r.usid, r.port, r.next_hop_mac) for r in t0.routes] == [
        (0x8000, 0, "02:00:80:00:00:01"),
        (0x8001, 0 + 1, "02:00:80:01:00:01"),
        (0x2100, 2, "02:00:21:00:00:00"),
        (0x2101, 3, "02:00:21:01:00:00"),
    ]
    assert [p.host_facing for p in t0.ports] == [True, True, False, False]
    t1 = tables["p0t1s1"]
    assert [(r.usid, r.port) for r in t1.routes] == [(0x1000, 0), (0x1001, 1)]
    assert not any(p.host_facing for p in t1.ports)
    # my-SID, routes, two per port (egress settings, ingress PFC thresholds), and each
    # switch's eight traffic classes
    assert sum(t.entry_count for t in tables.values()) \
        == 4 * (1 + 4 + 2 * 4) + 4 * (1 + 2 + 2 * 2) + 8 * len(protocol.CLASS_NAMES)


def test_every_path_is_routable_through_the_tables(small):
    """Walk each path through the tables: every hop's shifted uSID has a route."""
    tables = all_tables(small)
    by_usid = {t.my_usid: t for t in tables.values()}
    for path in all_paths(small):
        node = small.t0(path.plane, small.host(path.src).rack)
        for current, following in zip(path.usids, path.usids[1:]):
            table = by_usid[current]
            assert table.switch == node.name
            route = {r.usid: r for r in table.routes}[following]
            node = small.node(route.next_hop)
        assert node.name == f"h{path.dst}"


def test_kernel_commands(small):
    cmds = switch_commands(all_tables(small)["p0t1s0"])
    assert cmds[0] == ("ip -6 route replace fcbb:bb00:2000::/48 encap seg6local action End "
                       "flavors next-csid lblen 32 nflen 16 dev usid0")
    assert cmds[1:3] == [
        "ip -6 neigh replace fe80::1 lladdr 02:00:10:00:00:02 dev p0t1s0-eth0 nud permanent",
        "ip -6 route replace fcbb:bb00:1000::/48 via fe80::1 dev p0t1s0-eth0",
    ]
    assert len(cmds) == 1 + 2 * 2
    assert commands_for_intf(cmds, "p0t1s0-eth1") == cmds[3:5]
