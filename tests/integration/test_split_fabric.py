"""A fabric split across three namespace servers (topologies/placement.py, tunnels.py):
the hosts on one, plane 0 on another, plane 1 on a third, so every host-NIC link is a
VXLAN tunnel between two servers. Every SRv6 uSID path crosses tunnels and delivers; a
link flap takes both tunnel ends down and up; a server's path too short for the
fabric's frames is refused in one line naming a link; a tunnel end a dead run left on a
server is found and removed; the resolved topology records where each node ran."""

from __future__ import annotations

import json
import os

import pytest

from experiments.dataplanes.targets import KernelTarget
from experiments.run.checks import check_paths
from experiments.run.cleanup import find_leftovers
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock
from topologies.model import load_topology
from topologies.network import set_link
from topologies.nsserver import SSHD, NamespaceServers
from topologies.paths import all_paths
from topologies.placement import load_placement
from topologies.remote import is_remote
from topologies.resolved import resolved_topology
from topologies.tunnels import PREFIX, TunnelError, check_mtu, remove_leftovers

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason=f"{SSHD} is missing (openssh-server: make deps)")
CLUSTER = """servers:
  hosts: {namespace: true, hosts: all}
  plane0: {namespace: true, planes: [0]}
  plane1: {namespace: true, planes: [1]}
"""


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """2tier-2plane up on three namespace servers: (running fabric, placement, harness)."""
    folder = tmp_path_factory.mktemp("split")
    harness = NamespaceServers(folder / "servers")
    try:
        harness.start(["hosts", "plane0", "plane1"])
        (folder / "cluster.yaml").write_text(CLUSTER)
        fabric = load_topology("2tier-2plane")
        placement = load_placement(folder / "cluster.yaml", fabric, harness)
        with FabricLock("pytest: split fabric") as lock, \
                RunningFabric(fabric, KernelTarget(), lock, placement=placement) as network:
            yield network, placement, harness
    finally:
        harness.stop()
    assert not find_leftovers()


def _server_of(node) -> str:
    return node.server if is_remote(node) else "head"


def test_every_node_runs_on_its_server_and_every_host_port_is_a_tunnel(split):
    network, placement, _ = split
    net = network.net
    for host in network.fabric.hosts:
        node = net.get(host.name)
        assert _server_of(node) == "hosts"
        # its shell is a process of that server, its port 0 a VXLAN device there
        assert node.rcmd(f"cat /proc/{node.pid}/comm").strip() == "bash"
        assert "vxlan id" in node.cmd(f"ip -d link show {host.name}-eth0")
    for switch in network.fabric.switches:
        assert _server_of(net.get(switch.name)) == f"plane{switch.plane}"
    record = resolved_topology(network.fabric, "kernel", placement.as_dict(network.fabric))
    assert record["nodes"]["p1t1s0"]["server"] == "plane1"
    assert json.dumps(record["placement"]["servers"]["hosts"]["hosts"]) == '"all"'


def test_every_srv6_path_delivers_across_the_tunnels(split):
    network, _, _ = split
    result = check_paths(network.net, network.fabric)
    assert result.all_ok, [str(p) for p in result.failed[:5]]
    assert result.checked == len(all_paths(network.fabric))


def test_a_link_flap_takes_both_tunnel_ends_down_and_up(split):
    network, _, _ = split
    net = network.net

    def flags(node: str, intf: str) -> str:
        return net.get(node).cmd(f"ip -o link show {intf}").split("<")[1].split(">")[0]

    set_link(net, "h0", "p0t0r0", False)
    try:
        assert "UP" not in flags("h0", "h0-eth0").split(",")
        assert "UP" not in flags("p0t0r0", "p0t0r0-eth0").split(",")
    finally:
        set_link(net, "h0", "p0t0r0", True)
    assert "UP" in flags("h0", "h0-eth0").split(",")
    result = check_paths(net, network.fabric)
    assert result.all_ok, [str(p) for p in result.failed[:5]]


def test_a_path_too_short_for_the_frames_is_refused_in_one_line(split):
    network, placement, harness = split
    harness.ssh("plane1", "ip link set eth0 mtu 1500").check_returncode()
    try:
        with pytest.raises(TunnelError) as err:
            check_mtu(placement, network.fabric)
    finally:
        harness.ssh("plane1", "ip link set eth0 mtu 9100").check_returncode()
    said = str(err.value)
    assert "\n" not in said and "link h0 - p1t0r0" in said and "eth0 on plane1 has 1500" in said
    check_mtu(placement, network.fabric)


def test_a_tunnel_end_left_on_a_server_is_removed(split):
    network, placement, harness = split
    harness.ssh("plane0", f"ip link add {PREFIX}999 type vxlan id 999 local 10.250.0.11 "
                "dstport 4789 dev eth0").check_returncode()
    assert remove_leftovers(placement, network.fabric) == 1
    assert PREFIX not in harness.ssh("plane0", "ip -o link show").stdout
    # the fabric's own ends, in its nodes, are not leftovers
    assert check_paths(network.net, network.fabric).all_ok
