"""rtnetlink in a node's namespace (topologies/linkstate.py), against the kernel's own
tools: interface indexes, admin state, and the drops of a root queue that overflows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from topologies.linkstate import LinkState

SLOW_QUEUE = "tbf rate 8kbit burst 1600 limit 3000"  # two frames, then drops
SENT = 40


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def namespace():
    """A scratch namespace with a veth pair (x1 with a slow, shallow queue) and the pid
    of a process inside it."""
    name = f"mrc-linkstate-{os.getpid()}"
    ip("netns", "add", name)
    inside = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "60"])
    try:
        ip("-n", name, "link", "add", "x1", "type", "veth", "peer", "name", "x2")
        for intf in ("x1", "x2"):
            ip("-n", name, "link", "set", intf, "up")
        ip("-n", name, "addr", "add", "10.9.0.1/24", "dev", "x1")
        ip("-n", name, "neigh", "add", "10.9.0.2", "lladdr", "02:00:00:00:00:02", "dev", "x1")
        ip("netns", "exec", name, "tc", "qdisc", "add", "dev", "x1", "root", *SLOW_QUEUE.split())
        yield name, inside.pid
    finally:
        inside.kill()
        inside.wait()
        ip("netns", "del", name, check=False)


def tc_drops(name: str, intf: str) -> int:
    shown = subprocess.run(["ip", "netns", "exec", name, "tc", "-s", "-j", "qdisc", "show",
                            "dev", intf], capture_output=True, text=True, check=True)
    return sum(q["drops"] for q in json.loads(shown.stdout) if q.get("root"))


def test_indexes_state_and_queue_drops_agree_with_the_kernels_tools(namespace):
    name, pid = namespace
    state = LinkState()
    try:
        indexes = state.indexes(pid)
        shown = json.loads(ip("-n", name, "-j", "link", "show").stdout)
        assert indexes == {link["ifname"]: link["ifindex"] for link in shown}

        assert state.root_queue_drops(pid).get(indexes["x1"]) == 0
        send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                f"for _ in range({SENT}): s.sendto(bytes(1000), ('10.9.0.2', 9))")
        subprocess.run(["ip", "netns", "exec", name, sys.executable, "-c", send], check=True)
        drops = state.root_queue_drops(pid)
        assert 0 < drops[indexes["x1"]] < SENT
        assert drops[indexes["x1"]] == tc_drops(name, "x1")

        state.set(pid, "x2", False)
        assert "UP" not in json.loads(ip("-n", name, "-j", "link", "show", "x2").stdout)[0][
            "flags"]
    finally:
        state.close()
