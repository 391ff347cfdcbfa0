"""kill -9 of a run that holds a fabric split across namespace servers: the next run
takes over, comes up on the same servers and checks every path, and when it ends no
process of either run is left on any server. The dead run's node shells (their ssh,
named after their nodes here), its agents and its lock holders end with it or are
removed at the next start (experiments/run/cleanup.py, topologies/tunnels.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from experiments.dataplanes.targets import make_target
from experiments.run.checks import check_paths
from experiments.run.cleanup import find_leftovers
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock
from tests.integration.test_split_fabric import (  # noqa: F401 - pytestmark: no sshd, skip
    CLUSTER,
    REPO,
    pytestmark,
)
from topologies.model import load_topology
from topologies.nsserver import NamespaceServers
from topologies.placement import load_placement

# The run that is killed: the split fabric up on a target (argv[4]), with one agent
# per host running.
HOLDER = textwrap.dedent("""
    import sys, time
    from experiments.dataplanes.targets import make_target
    from experiments.run.agents import AgentSet
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock
    from topologies.model import load_topology
    from topologies.nsserver import NamespaceServers
    from topologies.placement import load_placement
    fabric = load_topology("2tier-2plane")
    placement = load_placement(sys.argv[1], fabric, NamespaceServers(sys.argv[2]))
    lock = FabricLock("the run to kill").acquire()
    network = RunningFabric(fabric, make_target(sys.argv[4]), lock,
                            placement=placement).start()
    agents = AgentSet(network, "mrc", __import__("pathlib").Path(sys.argv[3]))
    agents.wait_ready()
    print("up", flush=True)
    time.sleep(600)
""")


def _processes(harness: NamespaceServers, name: str) -> list[str]:
    """The commands running on a server, but its sshd and what asked."""
    out = harness.ssh(name, "ps -eo pid=,args=").stdout.splitlines()
    return [line.strip() for line in out if "sshd" not in line and "ps -eo" not in line]


def test_after_kill_9_the_next_run_is_clean_on_every_server(tmp_path):
    kill_and_run_again(tmp_path, "kernel")


def kill_and_run_again(tmp_path, target: str) -> None:
    """Start a split run of `target` in a process of its own, kill -9 it, and check
    that the next run comes up, checks every path and leaves nothing on any server."""
    harness = NamespaceServers(tmp_path / "servers")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    names = ["hosts", "plane0", "plane1"]
    holder = None
    try:
        harness.start(names)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(cluster),
                                   str(tmp_path / "servers"), str(tmp_path / "agents"),
                                   target],
                                  cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "up"
        assert any("hosts.agent" in p for p in _processes(harness, "hosts"))
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()

        fabric = load_topology("2tier-2plane")
        placement = load_placement(cluster, fabric, harness)
        with FabricLock("the next run") as lock:
            assert lock.stale is not None and lock.stale.command == "the run to kill"
            with RunningFabric(fabric, make_target(target), lock,
                               placement=placement) as network:
                assert check_paths(network.net, network.fabric).all_ok
        for name in names:
            assert _processes(harness, name) == [], name
            # nothing but the server's loopback and its link to the head
            links = harness.ssh(name, "ip -o link show").stdout.splitlines()
            assert len(links) == 2, links
            assert harness.ssh(name, "cat /run/mrc-testbed.lock").stdout.strip() == ""
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        harness.stop()
    assert not find_leftovers()
