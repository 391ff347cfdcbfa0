"""The fabric's forwarding ceiling, measured without Python: netsniff-ng's trafgen (C,
a packet socket's memory-mapped ring) sends crafted DATA-sized packets from h0 down the
same uSID paths the agents and the Python blaster use, and h1's interface counters
count what the fabric delivered; no program receives them.

It answers what the bench's agent/raw ratio cannot: whether the Python blaster, or the
fabric (veth hops, the switches' SRv6 forwarding, the eBPF program and its htb queues),
bounds the raw figure. Every packet is a full DATA frame (payload plus the MRC
header) in IPv6/UDP to a path's address; its UDP checksum is trafgen's, over the
path's first address, so h1's stack drops it after the counters saw it (the agents set
the checksum to zero instead: hosts/netio.py). Blasting one packet socket per plane
port, with its own process each, on the cores the fabric's forwarding needs too, as the
blaster and the agents do.

Used by bench/agent_throughput.py; `available()` says why not where trafgen is missing
(`make deps` installs netsniff-ng).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from hosts.protocol import MRC_UDP_PORT
from topologies.addressing import host_address
from topologies.paths import Path as FabricPath

PORT = MRC_UDP_PORT + 1  # beside the agents', as bench/rawsock.py
WARM_UP_S = 0.3


def available() -> str | None:
    """None when trafgen can run here, else why not."""
    if shutil.which("trafgen") is None:
        return "trafgen not found (Debian's netsniff-ng; make deps installs it)"
    return None


def packet_config(src_mac: str, dst_mac: str, src: str, dst: str, payload: int) -> str:
    """trafgen's description of one packet: Ethernet to the T0's port, IPv6 from h0's
    address to a path's, UDP to the bench's port with `payload` zero bytes (a DATA
    packet's UDP payload, as the blaster's datagrams)."""
    return (f"{{ eth(sa={src_mac}, da={dst_mac}), ipv6(sa={src}, da={dst}, hl=64), "
            f"udp(sp={PORT}, dp={PORT}), fill(0x00, {payload}) }}\n")


def _rx_packets(node, interfaces: list[str]) -> int:
    counts = node.cmd("cat " + " ".join(f"/sys/class/net/{i}/statistics/rx_packets"
                                        for i in interfaces))
    return sum(int(n) for n in counts.split())


def blast(net, fabric, paths: list[FabricPath], folder: Path, seconds: float,
          payload: int) -> dict:
    """trafgen on each of h0's plane ports that a path of `paths` leaves by; the
    packets h1's ports received per second over `seconds`, counted from WARM_UP_S
    after the senders started (their start is not the fabric's rate)."""
    sender, receiver = net.get("h0"), net.get("h1")
    # trafgen pins its worker i to CPU i: with one worker a process every sender would
    # share CPU 0 (82,000 pkt/s on 8 planes here, against 150,000 with a worker on each
    # core); on a single port, workers on every core contend for its queue instead
    # (65,000 against 82,000).
    workers = (os.cpu_count() or 1) if len(paths) > 1 else 1
    ports = {p.number: p for p in fabric.ports("h0")}
    rx_ports = [p.intf for p in fabric.ports("h1")]
    procs = []
    for path in paths:
        port = ports[path.plane]
        config = folder / f"trafgen-plane{path.plane}.cfg"
        config.write_text(packet_config(port.mac, port.peer_mac, host_address(0),
                                        path.address, payload))
        # One process a port, through the port's qdisc as the blaster's and the
        # agents' packets go; the namespace's sysctls are not trafgen's to tune;
        # --jumbo-support: ring slots of 64 KiB, for frames past its 2 KiB default.
        procs.append(sender.popen(["trafgen", "--dev", port.intf, "--conf", str(config),
                                   "--cpus", str(workers), "--qdisc-path", "--no-sock-mem",
                                   "--notouch-irq", "--no-cpu-stats", "--jumbo-support"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        time.sleep(WARM_UP_S)
        first, began = _rx_packets(receiver, rx_ports), time.monotonic()
        time.sleep(seconds)
        delivered, took = _rx_packets(receiver, rx_ports) - first, time.monotonic() - began
    finally:
        # trafgen works in a child it forks; its session (mnexec -d) ends with both.
        for proc in procs:
            os.killpg(proc.pid, signal.SIGINT)
        for proc in procs:
            proc.wait(timeout=10)
    return {"pps": delivered / took, "mbps": delivered * payload * 8 / took / 1e6,
            "delivered": delivered, "seconds": round(took, 3),
            "senders_ok": all(proc.returncode == 0 for proc in procs)}
