"""Run the path check on a started network and compare what arrived with the catalogue."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from topologies.model import Fabric
from topologies.paths import Path as FabricPath
from topologies.paths import all_paths

REPO = Path(__file__).resolve().parents[2]


class CheckError(RuntimeError):
    """The path-check processes did not start or answer."""


@dataclass
class PathCheckResult:
    checked: int
    ok: int
    failed: list[FabricPath] = field(default_factory=list)
    datagrams_sent: int = 0
    datagrams_received: int = 0
    duration_s: float = 0.0

    @property
    def all_ok(self) -> bool:
        return self.checked > 0 and self.ok == self.checked


def _readline(proc: subprocess.Popen, deadline: float, what: str) -> str:
    """Read one line from a process, failing clearly if it dies or stays silent."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            if line:
                return line.decode().strip()
        if proc.poll() is not None:
            err = proc.stderr.read().decode().strip().splitlines()
            raise CheckError(f"{what} exited: {err[-1] if err else proc.returncode}")
    raise CheckError(f"{what} did not answer in time")


def check_paths(net, fabric: Fabric, copies: int = 2, timeout_s: float = 3.0,
                start_timeout_s: float = 30.0) -> PathCheckResult:
    """Send datagrams along every path between every host pair (net: a started Mininet)."""
    started = time.monotonic()
    procs = {}
    try:
        for host in fabric.hosts:
            cmd = [sys.executable, "-m", "experiments.run.pathcheck", "--topology",
                   fabric.spec.source, "--host", str(host.index), "--copies", str(copies),
                   "--timeout", str(timeout_s)]
            procs[host.index] = net.get(host.name).popen(
                cmd, cwd=str(REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
        deadline = time.monotonic() + start_timeout_s
        for index, proc in procs.items():
            line = _readline(proc, deadline, f"path check on h{index}")
            if line != "ready":
                raise CheckError(f"path check on h{index} said {line!r}, not 'ready'")
        for proc in procs.values():
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        reports = {}
        deadline = time.monotonic() + start_timeout_s + timeout_s * 2 + 60
        for index, proc in procs.items():
            reports[index] = json.loads(_readline(proc, deadline, f"path check on h{index}"))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    arrived = {(src, dst, ev) for dst, rep in reports.items() for src, ev, _ in rep["received"]}
    paths = all_paths(fabric)
    failed = [p for p in paths if (p.src, p.dst, p.ev) not in arrived]
    return PathCheckResult(
        checked=len(paths),
        ok=len(paths) - len(failed),
        failed=failed,
        datagrams_sent=sum(r["sent"] for r in reports.values()),
        datagrams_received=sum(n for r in reports.values() for _, _, n in r["received"]),
        duration_s=time.monotonic() - started,
    )
