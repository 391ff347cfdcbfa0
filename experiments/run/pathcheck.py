"""Path check: send real datagrams along every path of the catalogue and count arrivals.

One process runs inside each host's namespace (`python3 -m experiments.run.pathcheck`). It
binds the MRC UDP port, prints `ready`, waits for `go` on stdin, then sends `copies`
rounds of one small datagram per path to every other host (each addressed with the
path's uSID list) while it receives the datagrams the others send it. It stops once
every expected (source, EV) pair has arrived or the timeout passes, and prints one JSON
line with what it sent and received. The runner (`experiments.run.checks`) compares them.

Datagrams carry a zero UDP checksum (see docs/protocol.md): the uSID shift rewrites
the destination address that a checksum would cover.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time

from hosts.protocol import MRC_UDP_PORT, UDP_NO_CHECK6_RX, UDP_NO_CHECK6_TX
from topologies.addressing import host_address
from topologies.model import load_topology
from topologies.paths import catalogue

MAGIC = b"MRCPATH1"
DATAGRAM = struct.Struct("!8sHHIH")  # magic, src, dst, ev, round


def open_socket(host_index: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.bind((host_address(host_index), MRC_UDP_PORT))
    sock.setblocking(False)
    return sock


def run(topology: str, me: int, copies: int, gap_s: float, timeout_s: float) -> dict:
    fabric = load_topology(topology)
    others = [h.index for h in fabric.hosts if h.index != me]
    outgoing = [p for dst in others for p in catalogue(fabric, me, dst)]
    expected = {(src, p.ev) for src in others for p in catalogue(fabric, src, me)}
    received: dict[tuple[int, int], int] = {}
    garbage = 0
    sock = open_socket(me)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return {"host": me, "error": "no go"}

    def drain() -> None:
        nonlocal garbage
        while True:
            try:
                data = sock.recv(2048)
            except BlockingIOError:
                return
            if len(data) != DATAGRAM.size or not data.startswith(MAGIC):
                garbage += 1
                continue
            _, src, dst, ev, _ = DATAGRAM.unpack(data)
            if dst != me:
                garbage += 1
                continue
            received[(src, ev)] = received.get((src, ev), 0) + 1

    sent = errors = 0
    for rnd in range(copies):
        for path in outgoing:
            try:
                sock.sendto(DATAGRAM.pack(MAGIC, me, path.dst, path.ev, rnd),
                            (path.address, MRC_UDP_PORT))
                sent += 1
            except OSError:
                errors += 1
            drain()
            # Pacing keeps the bursts of all hosts below the emulated queue limits.
            time.sleep(gap_s)
    deadline = time.monotonic() + timeout_s
    while not expected <= received.keys() and time.monotonic() < deadline:
        select.select([sock], [], [], 0.05)
        drain()
    return {
        "host": me,
        "sent": sent,
        "send_errors": errors,
        "garbage": garbage,
        "received": [[src, ev, n] for (src, ev), n in sorted(received.items())],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", required=True)
    parser.add_argument("--host", type=int, required=True)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--gap-ms", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args(argv)
    result = run(args.topology, args.host, args.copies, args.gap_ms / 1000, args.timeout)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
