"""Benchmark: what the kernel data plane's emulation costs a packet at each hop.

    sudo .venv/bin/python -m bench.kernel_hops        (make bench runs it)

On the throughput part's two-host 8-plane fabric at 1 Gbit/s (bench/agent_throughput.py
`fast_topology`, 1,200-byte payloads), the C sender (trafgen, bench/trafgen.py) sends
down one plane's paths, h0's NIC port, its T0, the T1, h1's T0: four egress ports, each
with what a run puts there. Three arrangements, three runs each (medians), on the same
fabric one after the other:

- **as a run sets it up**: htb (the link's classes and queues) and the eBPF switch
  program (traffic classes, virtual queues, ECN, trimming, counters; faults-only on the
  host port) on every port;
- **htb only**: the program taken off every port (htb's default class then takes every
  packet);
- **tbf only**, **pfifo only**: one plain qdisc at each port's root instead of htb's
  tree (the link's rate in one queue, with htb's burst of about one frame; a queue
  without a rate), to tell a qdisc's own cost from the rate's and from htb's;
- **bare**: no qdisc of the testbed's either: veths and the kernel's SRv6 forwarding.

A packet's CPU is the machine's busy time during a run (/proc/stat: every core, the
sender, the forwarding and the receiver's kernel) over the packets delivered, so each
layer's cost per packet per hop is the difference of those, divided by the four hops.
The machine must be quiet: anything else that runs is counted too. Figures go to stdout and into
bench/results.json under `kernel_hops`.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from bench import trafgen
from bench.agent_throughput import fast_topology
from bench.results import run_part
from experiments.dataplanes.targets import KernelTarget
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock
from hosts.protocol import DEFAULT_MTU_PAYLOAD, MRC_HEADER_BYTES
from topologies.model import load_topology
from topologies.paths import catalogue

REPO = Path(__file__).resolve().parents[1]
SECONDS = 3.0
REPEATS = 3
HOPS = 4  # egress ports on a path: h0's, its T0's, the T1's, h1's T0's
CORES = os.cpu_count() or 1


def _strip(network, what: str) -> None:
    """Take the program (`what` "ebpf") or every qdisc of the testbed's ("qdiscs") off
    every port of the fabric, or put one plain qdisc at the root instead of htb's tree:
    "pfifo" (a queue, no rate), "tbf" (the link's rate, one queue)."""
    fabric = network.fabric
    for node in (*fabric.hosts, *fabric.switches):
        lines = []
        for port in fabric.ports(node.name):
            lines.append(f"tc qdisc del dev {port.intf} clsact 2>/dev/null")
            link = fabric.link_params(port.tier)
            if what == "qdiscs":
                lines.append(f"tc qdisc del dev {port.intf} root 2>/dev/null")
            elif what == "pfifo":
                lines.append(f"tc qdisc replace dev {port.intf} root pfifo limit "
                             f"{link.queue_pkts}")
            elif what == "tbf":  # htb's burst at these rates: about one frame
                frame = fabric.spec.data_frame_bytes
                lines.append(f"tc qdisc replace dev {port.intf} root tbf rate "
                             f"{link.rate_mbit:g}mbit burst {frame + 100} "
                             f"limit {link.queue_pkts * frame}")
        network.net.get(node.name).cmd("; ".join(lines) + "; true")


def _busy() -> tuple[float, float]:
    """(busy, total) jiffies of every core so far (/proc/stat's first line)."""
    values = [float(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return sum(values) - idle, sum(values)


def _measured(network, fabric, paths, folder: Path, size: int) -> tuple[float, float, float]:
    """One C sender's run: (packets/s delivered, us of CPU a packet, busy cores)."""
    busy0, total0 = _busy()
    found = trafgen.blast(network.net, fabric, paths, folder, SECONDS, size)
    busy1, total1 = _busy()
    share = (busy1 - busy0) / max(1.0, total1 - total0)
    return found["pps"], share * CORES / max(found["pps"], 1.0) * 1e6, share * CORES


def hops(folder: Path, lock: FabricLock) -> dict:
    missing = trafgen.available()
    if missing is not None:
        print(f"kernel hops: skipped: {missing}", flush=True)
        return {"skipped": missing}
    fabric = load_topology(str(fast_topology(folder, DEFAULT_MTU_PAYLOAD)))
    paths = [p for p in catalogue(fabric, 0, 1) if p.plane == 0]
    size = fabric.spec.mtu_payload + MRC_HEADER_BYTES
    out: dict = {}
    with RunningFabric(fabric, KernelTarget(), lock) as network:
        if not network.ebpf_ports.ports:
            print(f"kernel hops: skipped: {network.ebpf.reason}", flush=True)
            return {"skipped": network.ebpf.reason}
        for arrangement, strip in (("htb_and_ebpf", None), ("htb_only", "ebpf"),
                                   ("tbf_only", "tbf"), ("pfifo_only", "pfifo"),
                                   ("bare", "qdiscs")):
            if strip:
                _strip(network, strip)
            runs = [_measured(network, fabric, paths, folder, size) for _ in range(REPEATS)]
            pps = [r[0] for r in runs]
            out[arrangement] = {"pps_median": round(statistics.median(pps)),
                                "pps_min": round(min(pps)), "pps_max": round(max(pps)),
                                "cpu_us_per_packet": round(statistics.median(
                                    r[1] for r in runs), 2),
                                "busy_cores": round(statistics.median(r[2] for r in runs), 2)}
    us = {k: v["cpu_us_per_packet"] for k, v in out.items()}
    out["per_hop_us"] = {"ebpf": round((us["htb_and_ebpf"] - us["htb_only"]) / HOPS, 2),
                         "htb": round((us["htb_only"] - us["bare"]) / HOPS, 2),
                         "tbf": round((us["tbf_only"] - us["bare"]) / HOPS, 2),
                         "pfifo": round((us["pfifo_only"] - us["bare"]) / HOPS, 2),
                         "bare_path": us["bare"]}
    for name, row in out.items():
        if name != "per_hop_us":
            print(f"kernel hops: {name}: {row['pps_median']:,} pkt/s ({row['pps_min']:,} "
                  f"to {row['pps_max']:,}), {row['cpu_us_per_packet']} us of CPU a packet "
                  f"({row['busy_cores']} of {CORES} cores busy)", flush=True)
    per_hop = out["per_hop_us"]
    print(f"kernel hops: per packet per hop, the eBPF switch program {per_hop['ebpf']} us, "
          f"htb {per_hop['htb']} us (tbf alone {per_hop['tbf']}, pfifo alone "
          f"{per_hop['pfifo']}); the bare path (sender, {HOPS} hops, receiver) "
          f"{per_hop['bare_path']} us", flush=True)
    return out


def main() -> int:
    return run_part("kernel_hops", hops)


if __name__ == "__main__":
    sys.exit(main())
