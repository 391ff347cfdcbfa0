"""Benchmark: what splitting a fabric across servers costs (`make bench`, its `split` part).

On namespace servers of this machine (topologies/nsserver.py), so that both sides run
on the same cores and the difference is the split alone: the tunnels' encapsulation,
the commands that reach the servers over ssh, the files sent to them.

1. Bring-up: 2tier-8plane up (eBPF switch program loaded, tables written) on this
   machine, and split over three servers (hosts | planes 0-3 | planes 4-7:
   topologies/servers/3-namespace.yaml), three times each: seconds, medians.
2. Agent goodput across tunnels: the throughput part's two-host 8-plane fabric at
   1 Gbit/s (the CPU is the limit), its hosts on one server and its planes on another,
   so every packet crosses two tunnels (NIC to T0, T0 to NIC), against the same paths
   on this machine alone: one large message over 1 plane and over 8, three runs each,
   medians, and split/local.

Figures go to stdout and into bench/results.json under `split`:

    sudo .venv/bin/python -m bench.split_overhead      (make bench runs it last)
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from bench.agent_throughput import agent_goodput, fast_topology
from bench.results import run_part
from experiments.dataplanes.targets import KernelTarget
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock
from hosts.protocol import DEFAULT_MTU_PAYLOAD
from topologies.model import Fabric, load_topology
from topologies.nsserver import NamespaceServers
from topologies.placement import Placement, load_placement

REPO = Path(__file__).resolve().parents[1]
THREE = REPO / "topologies" / "servers" / "3-namespace.yaml"
REPEATS = 3
# The fast fabric's hosts on one server, its planes on another.
TWO = """servers:
  hosts: {namespace: true, hosts: all}
  planes: {namespace: true, planes: all}
"""


def bringup_s(fabric: Fabric, lock: FabricLock, placement: Placement | None) -> float:
    """Seconds to bring `fabric` up (and its bring-up's own figure, which it returns)."""
    started = time.monotonic()
    with RunningFabric(fabric, KernelTarget(), lock, placement=placement) as network:
        if not network.ebpf_ports.ports:
            print(f"split: note: {network.ebpf.reason}", flush=True)
        return network.bringup_s or time.monotonic() - started


def split(folder: Path, lock: FabricLock) -> dict:
    harness = NamespaceServers(folder / "servers")
    out: dict = {}
    try:
        harness.start(["hosts", "planes-a", "planes-b", "planes"])
        fabric = load_topology("2tier-8plane")
        three = load_placement(THREE, fabric, harness)
        local = [bringup_s(fabric, lock, None) for _ in range(REPEATS)]
        spread = [bringup_s(fabric, lock, three) for _ in range(REPEATS)]
        out["bringup_2tier_8plane"] = row = {
            "local_s": _summary(local), "three_servers_s": _summary(spread),
            "split_over_local": round(statistics.median(spread) / statistics.median(local), 2)}
        print(f"split: 2tier-8plane bring-up, median (min to max) of {REPEATS}: on this "
              f"machine {_text(row['local_s'])} s; over three servers "
              f"{_text(row['three_servers_s'])} s ({row['split_over_local']}x)", flush=True)

        fast = load_topology(str(fast_topology(folder, DEFAULT_MTU_PAYLOAD)))
        (folder / "two.yaml").write_text(TWO)
        two = load_placement(folder / "two.yaml", fast, harness)
        for planes in (1, 8):
            runs = {}
            for where, placement in (("local", None), ("split", two)):
                with RunningFabric(fast, KernelTarget(), lock, placement=placement) as network:
                    runs[where] = sorted((agent_goodput(network, folder, planes)
                                          for _ in range(REPEATS)), key=lambda r: r["pps"])
            local_pps = [r["pps"] for r in runs["local"]]
            split_pps = [r["pps"] for r in runs["split"]]
            ok = all(r["ok"] for rs in runs.values() for r in rs)
            ratio = round(statistics.median(split_pps) / statistics.median(local_pps), 3)
            out[f"agent_{planes}_plane"] = {
                "local_pps": _summary(local_pps), "split_pps": _summary(split_pps),
                "split_over_local": ratio, "verified": ok}
            print(f"split: agent goodput, {planes} plane(s), data packets/s, median (min to "
                  f"max) of {REPEATS}: on this machine {_text(_summary(local_pps))}; across "
                  f"two tunnels {_text(_summary(split_pps))}; split/local = {ratio:.2f} "
                  f"({'verified' if ok else 'FAILED'})", flush=True)
    finally:
        harness.stop()
    return out


def _summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def _text(summary: dict) -> str:
    return f"{summary['median']:,g} ({summary['min']:,g} to {summary['max']:,g})"


def main() -> int:
    return run_part("split", split)


if __name__ == "__main__":
    raise SystemExit(main())
