"""The BMv2 data plane split across three namespace servers: the hosts on one, plane 0
on another, plane 1 on a third (topologies/placement.py), every host-NIC link a VXLAN
tunnel.

Each switch's process runs on its server, beside its ports; its P4Runtime port is
reached there only, by that server's controller (experiments/dataplanes/bmv2_server.py),
which writes the tables it computes from the run's topology: the head cannot connect to
it. Every path delivers, with one write batch a switch; a switch reboot on a server
fails exactly the paths through it and brings them back with the same entries written
once more; the counters are read on each switch's server. What a dead run's switches
leave on a server (a process, a port) is removed at the next start, and nothing else
(test_bmv2_split_kill.py: after a kill -9).
Skipped with the reason where BMv2, p4c or sshd is missing.
"""

from __future__ import annotations

import socket

import pytest

from experiments.dataplanes.targets import apply_fault
from experiments.run.checks import check_paths
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock
from tests.integration.test_split_fabric import (  # noqa: F401 - the servers, no sshd: skip
    pytestmark,
    servers,
)
from tests.p4.test_bmv2_network import check_programmed_and_forwarding
from tests.steps import step
from topologies.bmv2 import SERVER_FOLDER
from topologies.model import load_topology
from topologies.paths import all_paths
from topologies.placement import load_placement
from topologies.remote import is_remote, remove_leftovers_on


@pytest.fixture(scope="module")
def split_bmv2(servers):  # noqa: F811 - the imported fixture
    """2tier-2plane on BMv2 over the three namespace servers of the kernel's split
    tests (the hosts | plane 0 | plane 1): (network, target, harness, placement)."""
    from experiments.dataplanes.bmv2_target import Bmv2Target

    harness, cluster = servers
    fabric = load_topology("2tier-2plane")
    placement = load_placement(cluster, fabric, harness)
    target = Bmv2Target()
    with FabricLock("pytest: split BMv2 fabric") as lock, \
            RunningFabric(fabric, target, lock, placement=placement) as network:
        yield network, target, harness, placement


def _listens_here(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_each_switch_runs_and_is_programmed_on_its_server(split_bmv2):
    network, target, _, _ = split_bmv2
    fabric, net = network.fabric, network.net
    for switch in fabric.switches:
        node = net.get(switch.name)
        assert is_remote(node) and node.server == f"plane{switch.plane}"
        # its process is one of that server's, and its P4Runtime port is not the head's
        assert node.rcmd(f"cat /proc/{node.switch_pid}/comm").strip() == "simple_switch_g"
        assert not _listens_here(node.grpc_port)
    # counters read on each switch's server, by its controller
    check_programmed_and_forwarding(network, target)


def test_a_switch_reboot_on_a_server_fails_exactly_its_paths(split_bmv2):
    network, target, _, _ = split_bmv2
    net, fabric = network.net, network.fabric
    switch = fabric.t1(1, 0)
    node = net.get(switch.name)
    expected = {(p.src, p.dst, p.ev) for p in all_paths(fabric) if switch.usid in p.usids}
    batches, pid = target.write_batches, node.switch_pid
    apply_fault(network, step(0, False, "switch-reboot", (switch.name,)))
    try:
        result = check_paths(net, fabric, timeout_s=1.0)
        assert node.rcmd(f"kill -0 {pid} 2>/dev/null && echo alive || echo gone").strip() \
            == "gone"
    finally:
        apply_fault(network, step(0, True, "switch-reboot", (switch.name,)))
    assert {(p.src, p.dst, p.ev) for p in result.failed} == expected
    assert check_paths(net, fabric).all_ok
    assert target.write_batches == batches + 1 and node.switch_pid != pid


def test_what_a_dead_runs_switch_left_on_a_server_is_removed(split_bmv2):
    _, _, harness, placement = split_bmv2
    # a server that holds none of the fabric's switches
    ssh = next(server.ssh for server in placement.servers if server.name == "hosts")
    harness.ssh("hosts", f"mkdir -p {SERVER_FOLDER} && cp /bin/sleep /tmp/simple_switch_grpc "
                "&& ip link add mrcdead-eth0 type veth peer name mrcdead-eth1 && "
                f"(setsid /tmp/simple_switch_grpc 300 >/dev/null 2>&1 & echo $! > "
                f"{SERVER_FOLDER}/mrcdead.pid; sleep 0.2)").check_returncode()
    pid = harness.ssh("hosts", f"cat {SERVER_FOLDER}/mrcdead.pid").stdout.strip()
    removed = remove_leftovers_on(ssh, ["mrcdead-eth0", "p0t0r0-eth0"])
    assert removed == [f"pid-{pid}", "mrcdead-eth0"]
    # gone once its server's first process (sshd) has reaped it
    left = harness.ssh("hosts", f"ls {SERVER_FOLDER}; ip -o link show; for i in $(seq 40); "
                       f"do kill -0 {pid} 2>/dev/null || break; sleep 0.05; done; "
                       f"kill -0 {pid} 2>&1").stdout
    assert "mrcdead" not in left and "No such process" in left

