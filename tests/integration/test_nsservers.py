"""Namespace servers (topologies/nsserver.py): each answers ssh at its own address with
its own network, process ids and /tmp; two reach each other through a VXLAN tunnel
that carries a jumbo frame; many sessions share one connection; stopping one, or one
dying, leaves the others as they were. Root and openssh-server (make deps)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from topologies.nsserver import BRIDGE, REPO, SSHD, NamespaceServers, _link_exists

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason=f"{SSHD} is missing (openssh-server: make deps)")


@pytest.fixture
def harness(tmp_path):
    servers = NamespaceServers(tmp_path / "servers")
    try:
        yield servers
    finally:
        servers.stop()
        assert not servers.running()


def out(harness: NamespaceServers, name: str, command: str) -> str:
    done = harness.ssh(name, command)
    assert done.returncode == 0, f"{name}: {command}: {done.stderr}"
    return done.stdout


def test_each_server_has_its_own_address_processes_and_tmp(harness, tmp_path):
    servers = harness.start(["a", "b", "c"])
    assert [s.name for s in servers] == ["a", "b", "c"]
    assert len({s.address for s in servers}) == 3
    for server in servers:
        assert f"inet {server.address}/24" in out(harness, server.name,
                                                  "ip -o -4 addr show dev eth0")
        # Its first process is its sshd, and it sees none of the machine's.
        assert "sshd" in out(harness, server.name, "cat /proc/1/cmdline")
        assert str(os.getpid()) not in out(harness, server.name, "ls /proc").split()
    out(harness, "a", "touch /tmp/mine")
    assert "mine" in out(harness, "a", "ls /tmp")
    assert "mine" not in out(harness, "b", "ls /tmp")
    assert not os.path.exists("/tmp/mine")
    # One L2 segment: each reaches the others.
    b = next(s for s in servers if s.name == "b")
    out(harness, "a", f"ping -c 1 -W 2 {b.address}")


def test_a_vxlan_tunnel_between_two_servers_carries_a_jumbo_frame(harness):
    a, b = harness.start(["a", "b"])
    for me, other, inner in ((a, b, "192.168.250.1"), (b, a, "192.168.250.2")):
        out(harness, me.name, f"ip link add vx0 mtu 9000 type vxlan id 42 local {me.address} "
                              f"remote {other.address} dstport 4789 && "
                              f"ip addr add {inner}/24 dev vx0 && ip link set vx0 up")
    # 9,000 bytes of IPv4 (8,972 of ICMP payload), not to be fragmented.
    out(harness, "a", "ping -c 1 -W 2 -M do -s 8972 192.168.250.2")
    # One byte more does not fit the tunnel's MTU, and the kernel says so.
    done = harness.ssh("a", "ping -c 1 -W 2 -M do -s 8973 192.168.250.2")
    assert done.returncode != 0 and "message too long" in (done.stdout + done.stderr).lower()


def test_many_sessions_at_once_on_one_server(harness):
    """Mininet's cluster edition opens a session per remote node and link: more than
    OpenSSH's default ten (mininet issue 1078) must be let in."""
    harness.start(["a"])
    with ThreadPoolExecutor(max_workers=24) as pool:
        done = list(pool.map(lambda i: harness.ssh("a", f"sleep 1; echo {i}"), range(24)))
    assert [d.stdout.strip() for d in done] == [str(i) for i in range(24)]


def test_stopping_one_server_leaves_the_others(harness):
    a, b, c = harness.start(["a", "b", "c"])
    assert harness.stop(["b"]) == ["b"]
    assert [s.name for s in harness.running()] == ["a", "c"]
    assert not _link_exists(b.veth) and _link_exists(a.veth) and _link_exists(BRIDGE)
    out(harness, "a", f"ping -c 1 -W 2 {c.address}")
    with pytest.raises(Exception, match="no namespace server b runs here"):
        harness.ssh("b", "true")


def test_a_server_that_died_is_found_and_removed_at_the_next_start(harness):
    a, b = harness.start(["a", "b"])
    os.killpg(a.pid, signal.SIGKILL)
    os.waitpid(a.pid, 0)
    servers = harness.start(["c"])
    assert sorted(s.name for s in servers) == ["b", "c"]
    # The dead server's index (and its veth's name) is free again, and the others
    # kept theirs.
    assert {s.name: s.index for s in servers} == {"b": b.index, "c": a.index}
    assert _link_exists(a.veth)  # now c's
    out(harness, "b", "true")
    # At the dead one's MAC too: no neighbour entry anywhere is stale.
    assert f"link/ether {a.mac} " in out(harness, "c", "ip -o link show dev eth0")


def test_the_command_line_starts_lists_and_stops(tmp_path):
    state = str(tmp_path / "servers")
    base = [sys.executable, "-m", "topologies.nsserver", "--state", state]
    try:
        started = subprocess.run(base + ["start", "x"], capture_output=True, text=True,
                                 timeout=60, cwd=REPO)
        assert started.returncode == 0, started.stderr
        assert "x 10.250.0." in started.stdout
        listed = subprocess.run(base + ["list"], capture_output=True, text=True, cwd=REPO)
        assert listed.stdout.startswith("x 10.250.0.")
        said = subprocess.run(base + ["ssh", "x", "echo", "hello"], capture_output=True,
                              text=True, cwd=REPO)
        assert said.stdout == "hello\n"
    finally:
        stopped = subprocess.run(base + ["stop"], capture_output=True, text=True, cwd=REPO)
    assert stopped.stdout == "stopped: x\n"
    assert not NamespaceServers(tmp_path / "servers").running()
