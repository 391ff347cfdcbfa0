"""Joining a network namespace from Python: setns(2) through libc (Python 3.11 has no
os.setns). setns acts on the calling thread only, and a socket belongs to the
namespace it was made in, wherever its thread goes afterwards: so a thread may step
into a node's namespace, open its sockets there and step back (`inside`), and one
process can hold sockets of many nodes (the linkstate module's netlink sockets, an
agent process serving several hosts: hosts/agent.py)."""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000


def namespace_of(pid: int) -> str:
    """The path that names the network namespace of process `pid`."""
    return f"/proc/{pid}/ns/net"


def enter(path: str) -> None:
    """Move the calling thread into the network namespace at `path` (a /proc/<pid>/ns/net
    or /var/run/netns/<name>); OSError naming it if the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(path) as ns:
        if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {path}: {os.strerror(err)}")


@contextmanager
def inside(path: str) -> Iterator[None]:
    """The calling thread inside the network namespace at `path`, and back where it was
    afterwards."""
    with open("/proc/thread-self/ns/net") as home:
        enter(path)
        try:
            yield
        finally:
            enter(f"/proc/self/fd/{home.fileno()}")


def socket_in(pid: int, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket made inside the network namespace of process `pid`, by a short-lived
    thread that steps into it (the caller's threads stay where they are); OSError naming
    the namespace if it cannot be joined."""
    made: list = []

    def join_and_open() -> None:
        try:
            with inside(namespace_of(pid)):
                made.append(socket.socket(family, kind, proto))
        except OSError as err:
            made.append(err)

    worker = threading.Thread(target=join_and_open, name=f"netns-{pid}")
    worker.start()
    worker.join()
    if isinstance(made[0], OSError):
        raise made[0]
    return made[0]
