"""A thread's way into a network namespace, for the tests' own small harnesses (the eBPF
switch on a veth pair, the differential test's kernel switch): sockets made while
inside stay in that namespace."""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000  # setns(2): join a network namespace


@contextmanager
def in_namespace(name: str):
    """Switch this thread into the named namespace (`ip netns add`) and back."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/ns/net") as home, open(f"/var/run/netns/{name}") as target:
        if libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            libc.setns(home.fileno(), CLONE_NEWNET)
