"""Cluster files (topologies/placement.py) and the tunnels they make (topologies/
tunnels.py), without a server: each mistake is one line naming the file, the field and
the fix; every node lands on the server that holds its plane or host; a link crosses
servers exactly when its two nodes are apart; a path whose MTU is short is refused."""

from __future__ import annotations

import pytest

from topologies.model import load_topology
from topologies.nsserver import Server as NsServer
from topologies.placement import HEAD, PlacementError, load_placement
from topologies.tunnels import OVERHEAD, TunnelError, check_mtu, tunnels


class Harness:
    """Namespace servers as the harness reports them, none of them started."""

    def __init__(self, *names: str):
        self.servers = [NsServer(n, i, f"10.250.0.{10 + i}", 4000 + i)
                        for i, n in enumerate(names)]

    def running(self):
        return self.servers

    def ssh_argv(self, server):
        return ["ssh", f"root@{server.address}"]


THREE = """servers:
  hosts: {namespace: true, hosts: all}
  a: {namespace: true, planes: [0]}
  b: {namespace: true, planes: [1]}
"""


@pytest.fixture
def fabric():
    return load_topology("2tier-2plane")


def _load(tmp_path, text, fabric, harness=None):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return load_placement(path, fabric, harness or Harness("hosts", "a", "b"))


def test_each_node_runs_where_its_plane_or_host_is_placed(tmp_path, fabric):
    placement = _load(tmp_path, THREE, fabric)
    where = placement.where(fabric)
    assert {where[h.name].name for h in fabric.hosts} == {"hosts"}
    for switch in fabric.switches:
        assert where[switch.name].name == ("a" if switch.plane == 0 else "b")
    record = placement.as_dict(fabric)
    assert record["nodes"]["p1t1s0"] == "b" and record["servers"]["hosts"]["hosts"] == "all"
    assert record["servers"]["a"]["address"] == "10.250.0.11"
    # Namespace servers only: the head's tunnels leave by the servers' bridge.
    assert placement.head.device == "mrcsrv-br"


def test_what_no_server_holds_stays_on_the_head(tmp_path, fabric):
    placement = _load(tmp_path, "servers:\n  a: {namespace: true, planes: [1]}\n", fabric)
    record = placement.as_dict(fabric)["nodes"]
    assert record["h0"] == HEAD and record["p0t0r0"] == HEAD and record["p1t0r0"] == "a"


def test_a_link_crosses_servers_exactly_when_its_nodes_are_apart(tmp_path, fabric):
    placement = _load(tmp_path, "servers:\n  a: {namespace: true, planes: [1]}\n", fabric)
    crossing = tunnels(placement, fabric)
    # Plane 1's host links cross (hosts on the head); no switch-to-switch link does.
    expected = {(link.a, link.b) for link in fabric.links
                if link.plane == 1 and link.tier == "host_t0"}
    assert set(crossing) == expected
    assert len({t.vni for t in crossing.values()}) == len(crossing)
    tunnel = next(iter(crossing.values()))
    assert tunnel.server1 is None and tunnel.server2.name == "a"
    assert tunnel.end1.address == "10.250.0.1" and tunnel.end2.address == "10.250.0.11"


@pytest.mark.parametrize("short_by", [1, 0])
def test_a_path_too_short_for_the_fabric_frames_names_the_link(tmp_path, fabric, short_by):
    placement = _load(tmp_path, THREE, fabric)
    needed = fabric.spec.interface_mtu + OVERHEAD
    mtus = {None: 9100, "hosts": 9100, "a": needed - short_by, "b": 9100}
    device_mtu = lambda server: mtus[None if server is None else server.name]  # noqa: E731
    if not short_by:
        check_mtu(placement, fabric, device_mtu)
        return
    with pytest.raises(TunnelError) as err:
        check_mtu(placement, fabric, device_mtu)
    text = str(err.value)
    assert "\n" not in text and "link h0 - p0t0r0" in text
    assert f"needing MTU {needed}" in text and f"eth0 on a has {needed - 1}" in text


@pytest.mark.parametrize(("text", "field", "problem"), [
    ("servers: []\n", "servers", "must be a mapping"),
    ("servers:\n  a: {namespace: true, planes: [0]}\nextra: 1\n", "extra", "unknown field"),
    ("servers:\n  a: {namespace: true, planes: [0], gpus: 8}\n", "servers.a.gpus",
     "unknown field"),
    ("servers:\n  a: {namespace: true, planes: [2]}\n", "servers.a.planes",
     "plane numbers from 0 to 1"),
    ("servers:\n  a: {namespace: true, planes: [0]}\n  b: {namespace: true, planes: [0]}\n",
     "servers.b.planes", "plane 0 is already on a"),
    ("servers:\n  a: {namespace: true, hosts: [h0]}\n  b: {namespace: true, hosts: all}\n",
     "servers.b.hosts", "h0 is already on a"),
    ("servers:\n  a: {namespace: true, hosts: [h99]}\n", "servers.a.hosts", "host names"),
    ("servers:\n  a: {namespace: true}\n", "servers.a", "holds no plane and no host"),
    ("servers:\n  a: {planes: [0]}\n", "servers.a", "says neither how to reach it"),
    ("servers:\n  head: {namespace: true, planes: [0]}\n", "servers.head", "not 'head'"),
    ("servers:\n  c: {namespace: true, planes: [0]}\n", "servers.c",
     "no namespace server c runs"),
    ("servers:\n  a: {ssh: root@192.0.2.1, device: eth1, planes: [0]}\n",
     "servers.a.address", "IPv4 address"),
    ("servers:\n  a: {ssh: root@192.0.2.1, address: 192.0.2.1, planes: [0]}\n",
     "servers.a.device", "interface"),
    ("servers:\n  a: {ssh: root@192.0.2.1, address: 192.0.2.1, device: eth1, hosts: [h0]}\n",
     "servers.a.hosts", "hosts on a real server"),
])
def test_each_mistake_is_one_line_naming_the_field(tmp_path, fabric, text, field, problem):
    with pytest.raises(PlacementError) as err:
        _load(tmp_path, text, fabric)
    said = str(err.value)
    assert "\n" not in said and err.value.field == field and problem in said, said
    assert said.startswith(str(tmp_path / "cluster.yaml")) and "; fix: " in said


def test_a_real_server_needs_the_heads_own_tunnel_end(tmp_path, fabric):
    placement = _load(tmp_path, "servers:\n  a: {ssh: root@192.0.2.12, address: 192.0.2.12, "
                      "device: eth1, planes: [1]}\n", fabric)
    assert placement.servers[0].ssh[-1] == "root@192.0.2.12"
    with pytest.raises(PlacementError, match="head: the head holds nodes linked"):
        tunnels(placement, fabric)


def test_a_missing_cluster_file_says_so(tmp_path, fabric):
    with pytest.raises(PlacementError, match="no such cluster file"):
        load_placement(tmp_path / "none.yaml", fabric, Harness())
