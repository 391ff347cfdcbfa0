"""Remove what a run leaves behind: node shells, interfaces, agent and switch processes,
the eBPF switch program's pins.

Mininet keeps each node's namespace alive through a shell process named
`mininet:<node>`; killing those shells frees the namespaces and the veths inside them.
Interfaces of the root namespace (BMv2 switches live there) are deleted by name.

Two ways, by who owns what:
- `remove(remains)`: exactly what one run recorded as its own (`Remains`, kept in the
  fabric lock's file, experiments/run/fabric_lock.py): its nodes' shells, the testbed's
  processes in its namespaces or naming its interfaces, its interfaces, its pins. A
  run removes its own fabric this way when it stops, and the next holder of the lock
  removes a killed run's remains. Nothing of another tool is touched: the P4 tests'
  veths, the BMv2 bench's, a node another harness made.
- `cleanup()`: every leftover by the names of this testbed's addressing plan (h<N>,
  p<P>t0r<R>, p<P>t1s<S>, the harnesses' veths), whoever made it: `make clean-net`, by
  hand, under the lock.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass

from experiments.run.capture import PROCESS_PATTERN as CAPTURE_PATTERN
from topologies.ebpf_program import PIN_DIR

NODE = r"(?:h\d+|p\d+t0r\d+|p\d+t1s\d+)"
SHELL_RE = re.compile(rf"mininet:({NODE})$")
# Fabric ports, and the veths of the P4 test harnesses and the BMv2 bench (root
# namespace; their own `finally` removes them unless they were killed with -9).
INTF_RE = re.compile(rf"^(?:{NODE}-eth\d+|mrcp4-[st]\d+|mrcdk-\w+|bmvb\w*)$")
# Processes the testbed starts inside nodes or beside them.
PROCESS_RE = re.compile(
    r"-m (?:experiments\.pathcheck|hosts\.agent)\b|simple_switch_grpc .*mrc_switch|"
    + CAPTURE_PATTERN
)


@dataclass
class Leftovers:
    shells: list[int]
    processes: list[int]
    interfaces: list[str]
    pins: bool = False  # the eBPF program's pinned files

    def __bool__(self) -> bool:
        return bool(self.shells or self.processes or self.interfaces or self.pins)

    def describe(self) -> str:
        return (f"{len(self.shells)} node shells, {len(self.processes)} processes, "
                f"{len(self.interfaces)} interfaces")


def _processes() -> list[tuple[int, str]]:
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        procs.append((int(entry), cmdline))
    return procs


def _interfaces(any_name: bool = False) -> list[str]:
    """The root namespace's interfaces the testbed's names match (or all of them)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines() if line]
    return [n for n in names if any_name or INTF_RE.match(n)]


@dataclass(frozen=True)
class Remains:
    """What one run's fabric puts on the machine, by name: its nodes (each a shell
    `mininet:<node>`), the inodes of its nodes' network namespaces (the agents and
    captures inside them outlive a killed shell), every interface of its links, and
    whether it pinned the eBPF program."""

    nodes: tuple[str, ...] = ()
    namespaces: tuple[int, ...] = ()
    interfaces: tuple[str, ...] = ()
    pins: bool = False

    def __bool__(self) -> bool:
        return bool(self.nodes or self.namespaces or self.interfaces or self.pins)

    def as_dict(self) -> dict:
        return {"nodes": list(self.nodes), "namespaces": list(self.namespaces),
                "interfaces": list(self.interfaces), "pins": self.pins}

    @classmethod
    def from_dict(cls, data: object) -> Remains:
        """The remains a lock file names; nothing for what is not such a record."""
        if not isinstance(data, dict):
            return cls()

        def listed(key: str, kind: type) -> tuple:
            values = data.get(key)
            return tuple(v for v in values if isinstance(v, kind)) if isinstance(
                values, list) else ()

        return cls(nodes=listed("nodes", str), namespaces=listed("namespaces", int),
                   interfaces=listed("interfaces", str), pins=data.get("pins") is True)


def namespace_of(pid: int) -> int | None:
    """The inode of process `pid`'s network namespace (None once it is gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def find_leftovers() -> Leftovers:
    procs = _processes()
    return Leftovers(
        shells=[pid for pid, cmd in procs if SHELL_RE.search(cmd)],
        processes=[pid for pid, cmd in procs if PROCESS_RE.search(cmd)],
        interfaces=_interfaces(),
        pins=PIN_DIR.exists(),
    )


def owned(remains: Remains) -> Leftovers:
    """What of `remains` is still on the machine: shells of its nodes; the testbed's
    processes in its namespaces (recorded, or a live shell's) or naming one of its
    interfaces (BMv2 switches and captures in the root namespace); its interfaces."""
    procs = _processes()
    nodes, names = set(remains.nodes), set(remains.interfaces)
    shells = [pid for pid, cmd in procs
              if (m := SHELL_RE.search(cmd)) is not None and m.group(1) in nodes]
    spaces = set(remains.namespaces) | {namespace_of(pid) for pid in shells}
    spaces.discard(None)
    spaces.discard(namespace_of(os.getpid()))  # never the one cleaning up (the root's)
    processes = [pid for pid, cmd in procs if PROCESS_RE.search(cmd)
                 and (namespace_of(pid) in spaces
                      or names.intersection(re.split(r"[\s@=,:]+", cmd)))]
    interfaces = [n for n in _interfaces(any_name=True) if n in names]
    return Leftovers(shells, processes, interfaces, pins=remains.pins and PIN_DIR.exists())


def remove(remains: Remains) -> Leftovers:
    """Kill and delete what is left of `remains` (`owned`), nothing else; returns it."""
    return _kill_and_delete(owned(remains))


def remove_stale(lock) -> Leftovers:
    """Remove what the holder before `lock` (experiments/run/fabric_lock.py FabricLock),
    killed with its fabric up, recorded as its own; nothing if the lock was free.
    Returns what was found."""
    return remove(lock.stale.remains if lock.stale is not None else Remains())


def cleanup() -> Leftovers:
    """Kill and delete every leftover the testbed's names match, whoever made it;
    returns what was found."""
    return _kill_and_delete(find_leftovers())


def _kill_and_delete(found: Leftovers) -> Leftovers:
    for pid in found.processes + found.shells:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for name in found.interfaces:  # a veth's peer may have gone with it
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    if found.pins:
        shutil.rmtree(PIN_DIR, ignore_errors=True)
    return found


if __name__ == "__main__":
    print(f"removed {cleanup().describe()}")
