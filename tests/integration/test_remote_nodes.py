"""Mininet nodes on a namespace server (topologies/remote.py): twelve on one server, more
than the ten OpenSSH lets one connection carry by default (mininet issue 1078), each
in a network namespace of its own there, linked in pairs that reach each other."""

from __future__ import annotations

import os

import pytest
from mininet.link import Link

from topologies.nsserver import SSHD, NamespaceServers
from topologies.remote import RemoteHost

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason=f"{SSHD} is missing (openssh-server: make deps)")
NODES = 12


def test_twelve_remote_nodes_on_one_server_reach_each_other_in_pairs(tmp_path):
    harness = NamespaceServers(tmp_path / "servers")
    nodes: list[RemoteHost] = []
    try:
        (server,) = harness.start(["s"])
        ssh = harness.ssh_argv(server)
        nodes = [RemoteHost(f"r{i}", ssh=ssh) for i in range(NODES)]
        server_ns = nodes[0].rcmd("readlink /proc/self/ns/net").strip()
        spaces = {node.cmd("readlink /proc/self/ns/net").strip() for node in nodes}
        assert len(spaces) == NODES and server_ns not in spaces
        for node in nodes:  # each node's shell is a process of the server
            assert node.rcmd(f"cat /proc/{node.pid}/cmdline").startswith("bash")
        for i in range(0, NODES, 2):
            a, b = nodes[i], nodes[i + 1]
            link = Link(a, b)
            link.intf1.setIP(f"10.9.{i}.1/24")
            link.intf2.setIP(f"10.9.{i}.2/24")
        for i in range(0, NODES, 2):
            said = nodes[i].cmd(f"ping -c 1 -W 2 10.9.{i}.2")
            assert " 0% packet loss" in said, said
        # A node's processes run in its namespace on the server.
        ping = nodes[1].popen(["ping", "-c", "1", "-W", "2", "10.9.0.1"])
        assert ping.wait(timeout=10) == 0
    finally:
        for node in nodes:
            node.stop(deleteIntfs=True)
        harness.stop()
    assert not harness.running()
