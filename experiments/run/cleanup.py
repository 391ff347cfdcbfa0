"""Remove what a run may leave behind: node shells, interfaces, agent and switch processes,
the eBPF switch program's pins.

Mininet keeps each node's namespace alive through a shell process named
`mininet:<node>`; killing those shells frees the namespaces and the veths inside them.
Interfaces of the root namespace (BMv2 switches live there) are deleted by name. Only
names of this testbed's addressing plan are touched (h<N>, p<P>t0r<R>, p<P>t1s<S>).
The pins of the eBPF switch program (topologies/ebpf_program.py PIN_DIR) go too.
The runner calls `cleanup()` before building (to recover from a `kill -9`) and after
every run; `make clean-net` calls it by hand.
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
SHELL_RE = re.compile(rf"mininet:{NODE}$")
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


def _interfaces() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines() if line]
    return [n for n in names if INTF_RE.match(n)]


def find_leftovers() -> Leftovers:
    procs = _processes()
    return Leftovers(
        shells=[pid for pid, cmd in procs if SHELL_RE.search(cmd)],
        processes=[pid for pid, cmd in procs if PROCESS_RE.search(cmd)],
        interfaces=_interfaces(),
        pins=PIN_DIR.exists(),
    )


def cleanup() -> Leftovers:
    """Kill and delete every leftover; returns what was found."""
    found = find_leftovers()
    for pid in found.processes + found.shells:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for name in _interfaces():
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    if found.pins:
        shutil.rmtree(PIN_DIR, ignore_errors=True)
    return found


if __name__ == "__main__":
    print(f"removed {cleanup().describe()}")
