"""Raw UDP socket blaster and counter, the yardstick for the agent's goodput.

Run inside a host namespace by bench/agent_throughput.py, from the repository root:
    python3 -m bench.rawsock recv --address A --seconds S
    python3 -m bench.rawsock send --address A --dst-addresses X,Y,... --seconds S --size N
The sender cycles over the given path addresses (one per plane, or one) as fast as the
socket accepts; the receiver counts datagrams and bytes and prints one JSON line. Both
use the port beside the agents' unless told otherwise (`--port`, and `--bind-port` for
the sender's own: bench/agent_loopback.py runs both ends on one loopback address).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

from hosts.protocol import MRC_UDP_PORT, UDP_NO_CHECK6_RX, UDP_NO_CHECK6_TX

PORT = MRC_UDP_PORT + 1  # beside the agents' port, so both can run at once


def open_socket(address: str, port: int = PORT) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
    sock.bind((address, port))
    return sock


def receive(address: str, seconds: float, port: int = PORT) -> dict:
    sock = open_socket(address, port)
    sock.settimeout(0.2)
    print("ready", flush=True)
    count = size = 0
    first = last = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            n = len(sock.recv(65535))
        except TimeoutError:
            continue
        last = time.monotonic()
        first = first or last
        count += 1
        size += n
    span = (last - first) if first and last and last > first else 0.0
    return {"datagrams": count, "bytes": size, "span_s": span,
            "pps": count / span if span else 0.0,
            "mbps": size * 8 / span / 1e6 if span else 0.0}


def send(address: str, destinations: list[str], seconds: float, size: int,
         port: int = PORT, bind_port: int = PORT) -> dict:
    sock = open_socket(address, bind_port)
    payload = bytes(size)
    count = errors = 0
    end = time.monotonic() + seconds
    n = len(destinations)
    while time.monotonic() < end:
        for _ in range(64):
            try:
                sock.sendto(payload, (destinations[count % n], port))
                count += 1
            except OSError:
                errors += 1
    return {"sent": count, "errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["send", "recv"])
    parser.add_argument("--address", required=True)
    parser.add_argument("--dst-addresses", default="")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--size", type=int, default=1400)
    parser.add_argument("--port", type=int, default=PORT, help="the receiver's port")
    parser.add_argument("--bind-port", type=int, help="the sender's own (default: --port)")
    args = parser.parse_args()
    if args.mode == "recv":
        result = receive(args.address, args.seconds, args.port)
    else:
        result = send(args.address, args.dst_addresses.split(","), args.seconds, args.size,
                      args.port, args.port if args.bind_port is None else args.bind_port)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
