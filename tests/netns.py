"""Ways into a network namespace, for the tests' own small harnesses (the eBPF switch on
a veth pair, the differential test's kernel switch): a thread's (`in_namespace`:
sockets made while inside stay in that namespace) and a process's pid (`holder`)."""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager

from topologies import netns


def in_namespace(name: str):
    """Switch this thread into the named namespace (`ip netns add`) and back."""
    return netns.inside(f"/var/run/netns/{name}")


@contextmanager
def holder(name: str):
    """A process sleeping in the named namespace, whose pid names the namespace to
    `nsenter --net` (what topologies/ebpf_program.py runs tc with); killed on exit."""
    # `ip netns exec` joins the namespace, then becomes `sleep`: the same pid.
    proc = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "3600"])
    try:
        home = os.readlink("/proc/self/ns/net")
        while os.readlink(f"/proc/{proc.pid}/ns/net") == home:
            if proc.poll() is not None:
                raise OSError(f"ip netns exec {name} sleep ended ({proc.returncode})")
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
