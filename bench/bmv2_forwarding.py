"""Benchmark: packets per second through BMv2, the testbed's switch against a bare one.

    sudo .venv/bin/python -m bench.bmv2_forwarding          (or: make bench-bmv2)
    sudo .venv/bin/python -m bench.bmv2_forwarding --all    (every setting on its own)

Builds veth chains in the root namespace (interfaces `bmvb*`, removed in `finally`,
and removed first if a killed run left them) and sends MRC DATA frames of the
testbed's full size along a path of 2tier-2plane: through one switch (T0 p0t0r0, h0 to
h1 in the same rack) and through three (p0t0r0, T1 p0t1s0, p0t0r1: h0 to h2). Every
switch runs p4src/mrc_switch.p4 with the tables the testbed writes for it.

Each path is measured with
- `testbed`: the switch as the testbed starts it (topologies/bmv2.py `switch_argv`:
  log file and level, strict priority queues, Thrift) on ports prepared as the
  testbed prepares them (`prepare_ports`: segmentation offloads off), and its queues
  set through the Thrift CLI as the BMv2 target sets them (`queue_commands`), at a
  rate far above what BMv2 forwards, so that the pacing code runs but never limits;
- `bare`: `simple_switch_grpc` with logging off (`--log-level off`: without it, BMv2
  formats every per-packet trace message even with no log file to write it to), no
  priority queues and no queue settings, same program, same tables.
With `--all`, also each setting alone on top of `bare` (no log file at BMv2's default
level, a log file at trace or info, `--log-flush`, priority queues, queue rates), to
show where a slow start-up loses.

The sender is a raw AF_PACKET socket in Python sending one pre-built frame (no
tcpreplay here), with at most WINDOW frames in flight: it reads the far veth's kernel
rx counter, which is also the count (the receiver costs no CPU). A sender that floods
the path as fast as it can measures the sender, not the switch: on two cores it takes
the CPU the switches need and the figures follow how busy it happens to be. Each
setting runs `--runs` times, interleaved with the others so that a busy moment of the
machine does not fall on one setting only, and the median counts. Prints a table and
the ratios; figures also go to build/bmv2-forwarding.json, where
experiments/dataplanes/bmv2_target.py reads the machine's three-switch figure to choose BMv2
link rates.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "build" / "bmv2-forwarding.json"
PREFIX = "bmvb"
TOPOLOGY = "2tier-2plane"
THRIFT_BASE, GRPC_BASE = 9700, 28700  # away from the fabric's and the P4 tests' ports
# A queue rate no BMv2 reaches on a PC (packets/s): the pacing code runs, never limits.
FAST_QUEUE_MBIT = 100_000
# Frames in flight through the path, and how long a window may stand still before its
# frames count as lost (a switch drops what its full queue cannot take).
WINDOW = 64
STALL_S = 0.05


@dataclass(frozen=True)
class Setting:
    """How a switch is started: the testbed's way, or bare plus one thing."""

    name: str
    testbed: bool = False  # topologies/bmv2.py's command line, whole
    log_level: str | None = "off"  # --log-level (None: BMv2's default, trace)
    log_file: bool = False
    log_flush: bool = False
    priority_queues: bool = False
    queue_rates: bool = False  # queue_commands() through the Thrift CLI


BARE = Setting("bare")
TESTBED = Setting("testbed", testbed=True, queue_rates=True)
ABLATIONS = (
    # No log file does not mean no logging: BMv2 still formats every trace message.
    Setting("bare, no log file, default level", log_level=None),
    Setting("bare + log file at trace", log_level="trace", log_file=True),
    Setting("bare + log file at info", log_level="info", log_file=True),
    Setting("bare + log file at info + --log-flush", log_level="info", log_file=True,
            log_flush=True),
    Setting("bare + priority queues", priority_queues=True),
    Setting("bare + priority queues + queue rates", priority_queues=True, queue_rates=True),
)


class BenchError(RuntimeError):
    """The bench could not set up or run; the message is one line."""


def missing_tools() -> str | None:
    for tool in ("p4c-bm2-ss", "simple_switch_grpc", "simple_switch_CLI"):
        if shutil.which(tool) is None:
            return f"{tool} not found: install BMv2 and p4c (make deps-p4, or the Vagrant VM)"
    if os.geteuid() != 0:
        return "needs root (veth interfaces): sudo .venv/bin/python -m bench.bmv2_forwarding"
    return None


# ------------------------------------------------------------------ the path
@dataclass(frozen=True)
class Hop:
    switch: str
    in_port: int
    out_port: int


def path_hops(fabric, src: int, dst: int) -> tuple[list[Hop], str]:
    """The switches a packet from host src to host dst takes in plane 0, spine 0, with
    its ports there, and the destination address it carries."""
    from hosts.protocol import make_ev
    from topologies.paths import path_for_ev

    path = path_for_ev(fabric, src, dst, make_ev(0, 0))
    by_usid = {s.usid: s.name for s in fabric.switches}
    names = [fabric.host(src).name, *(by_usid[u] for u in path.usids[:-1]),
             fabric.host(dst).name]
    hops = []
    for prev, name, nxt in zip(names, names[1:], names[2:]):
        ports = fabric.ports(name)
        hops.append(Hop(name, next(p.number for p in ports if p.peer == prev),
                        next(p.number for p in ports if p.peer == nxt)))
    return hops, path.address


def intf(switch_index: int, side: str) -> str:
    return f"{PREFIX}{switch_index}{side}"  # side "i" (in) or "o" (out)


SENDER, SINK = f"{PREFIX}send", f"{PREFIX}sink"


def chain_pairs(hops: int) -> list[tuple[str, str]]:
    """veth pairs: sender -> switch 0 in, switch i out -> switch i+1 in, last out -> sink."""
    ends = [SENDER] + [name for i in range(hops) for name in (intf(i, "i"), intf(i, "o"))]
    ends.append(SINK)
    return [(ends[k], ends[k + 1]) for k in range(0, len(ends), 2)]


def remove_links() -> None:
    listing = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    for line in listing.stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def make_links(pairs: list[tuple[str, str]]) -> None:
    for a, b in pairs:
        done = subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"ip link add {a}: {done.stderr.strip()}")
        for name in (a, b):
            # The kernel must neither answer nor originate anything on these ports.
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"],
                           capture_output=True)
            subprocess.run(["ip", "link", "set", name, "up"], check=True)


# ------------------------------------------------------------------ the switches
def argv(setting: Setting, index: int, hop: Hop, json_path: Path, log_dir: Path) -> list[str]:
    from topologies.bmv2 import switch_argv

    ports = [(hop.in_port, intf(index, "i")), (hop.out_port, intf(index, "o"))]
    thrift, grpc = THRIFT_BASE + index, GRPC_BASE + index
    if setting.testbed:
        return switch_argv(index + 1, thrift, grpc, ports, json_path, log_dir / hop.switch)
    args = ["simple_switch_grpc", "--device-id", str(index + 1), "--thrift-port", str(thrift)]
    if setting.log_file:
        args += ["--log-file", str(log_dir / hop.switch)]
    if setting.log_level:
        args += ["--log-level", setting.log_level]
    if setting.log_flush:
        args.append("--log-flush")
    for port, name in ports:
        args += ["-i", f"{port}@{name}"]
    args += [str(json_path), "--", "--grpc-server-addr", f"127.0.0.1:{grpc}"]
    if setting.priority_queues:
        from hosts.protocol import PRIORITY_QUEUES

        args += ["--priority-queues", str(PRIORITY_QUEUES)]
    return args


def start_switches(setting: Setting, hops: list[Hop], fabric, program, log_dir: Path
                   ) -> list[subprocess.Popen]:
    from controller.program import program_switch
    from controller.tables import switch_tables
    from topologies.bmv2 import prepare_ports, queue_commands, run_cli, wait_for_port

    p4info, json_path = program
    procs = []
    for i, hop in enumerate(hops):
        if setting.testbed:
            prepare_ports([intf(i, "i"), intf(i, "o")])
        proc = subprocess.Popen(argv(setting, i, hop, json_path, log_dir),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        wait_for_port(GRPC_BASE + i, proc, 20, f"simple_switch_grpc for {hop.switch}")
        program_switch(f"127.0.0.1:{GRPC_BASE + i}", i + 1, p4info, json_path.read_bytes(),
                       switch_tables(fabric, fabric.node(hop.switch)))
        if setting.queue_rates:
            depth = fabric.spec.host_t0.queue_pkts
            run_cli(THRIFT_BASE + i, queue_commands(hop.in_port, FAST_QUEUE_MBIT, depth)
                    + queue_commands(hop.out_port, FAST_QUEUE_MBIT, depth), hop.switch)
    return procs


def stop_switches(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ traffic
def data_frame(fabric, src: int, first_hop: Hop, address: str) -> bytes:
    """A full-size MRC DATA frame from host src, as its NIC sends it to the T0."""
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    from hosts import protocol
    from hosts.mrc_scapy import MRC
    from topologies.addressing import host_address, mac_address

    host = fabric.host(src).name
    head = (Ether(src=mac_address(host, 0), dst=mac_address(first_hop.switch,
                                                            first_hop.in_port))
            / IPv6(src=host_address(src), dst=address,
                   tc=protocol.traffic_class(protocol.DEFAULT_DSCP[protocol.TRIMMABLE], 0))
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=protocol.DATA, conn_id=1, ev=0, psn=0, msg_len=1 << 20))
    pad = protocol.DATA_FRAME_BYTES - len(bytes(head))
    return bytes(head / (b"\0" * pad))


def rx_packets(name: str) -> int:
    return int(Path(f"/sys/class/net/{name}/statistics/rx_packets").read_text())


def blast(frame: bytes, seconds: float, warmup_s: float) -> tuple[float, float]:
    """(sent/s, arrived/s) of one frame sent from the sender veth with at most WINDOW
    frames in flight (sent, not yet counted at the sink): the switches are kept busy
    without being flooded, and the sender sleeps while the window is full, so it takes
    little of the CPU the switches need. A window that stops moving for STALL_S counts
    its frames as lost and opens again. Arrivals are counted after `warmup_s`."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((SENDER, 0))
    counter = open(f"/sys/class/net/{SINK}/statistics/rx_packets")

    def arrived() -> int:
        counter.seek(0)
        return int(counter.read())

    base = arrived()
    sent = lost = 0
    start = time.monotonic()
    measure_from, first = start + warmup_s, None
    end = measure_from + seconds
    moved = start
    last_seen = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        seen = arrived() - base
        if first is None and now >= measure_from:
            first = (seen, now)
        if seen != last_seen:
            last_seen, moved = seen, now
        elif now - moved > STALL_S:
            lost, moved = sent - seen, now
        room = WINDOW - (sent - seen - lost)
        if room <= 0:
            time.sleep(0.0002)  # the switches' turn
            continue
        for _ in range(min(room, 16)):
            try:
                sock.send(frame)
                sent += 1
            except BlockingIOError:
                break
    last, stop = arrived() - base, time.monotonic()
    counter.close()
    sock.close()
    assert first is not None
    return sent / (stop - start), (last - first[0]) / (stop - first[1])


def measure(setting: Setting, switches: int, fabric, program, seconds: float,
            log_dir: Path) -> dict:
    src, dst = (0, 1) if switches == 1 else (0, 2)
    hops, address = path_hops(fabric, src, dst)
    if len(hops) != switches:
        raise BenchError(f"{TOPOLOGY}: h{src}->h{dst} crosses {len(hops)} switches, "
                         f"expected {switches}")
    remove_links()
    procs: list[subprocess.Popen] = []
    try:
        make_links(chain_pairs(len(hops)))
        procs = start_switches(setting, hops, fabric, program, log_dir)
        frame = data_frame(fabric, src, hops[0], address)
        # One frame first: the path must forward at all before it is timed.
        before = rx_packets(SINK)
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((SENDER, 0))
            sock.send(frame)
        deadline = time.monotonic() + 5
        while rx_packets(SINK) == before:
            if time.monotonic() > deadline:
                raise BenchError(f"{setting.name}: no frame came through {switches} "
                                 "switch(es) within 5 s")
            time.sleep(0.05)
        sent, arrived = blast(frame, seconds, warmup_s=1.0)
        memory = [rss_mb(proc.pid) for proc in procs]
    finally:
        stop_switches(procs)
        remove_links()
    return {"setting": setting.name, "switches": switches, "sent_pps": round(sent),
            "pps": round(arrived), "rss_mb_per_switch": round(max(memory), 1)}


def rss_mb(pid: int) -> float:
    """A process's resident memory now, in MB (/proc/PID/status VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed part of each run")
    parser.add_argument("--all", action="store_true", help="also each setting on its own")
    parser.add_argument("--runs", type=int, default=3, help="runs of each setting (median)")
    args = parser.parse_args()
    reason = missing_tools()
    if reason:
        print(f"bmv2_forwarding: {reason}", file=sys.stderr)
        return 2
    from experiments.dataplanes.bmv2_target import compile_program
    from topologies.bmv2 import Bmv2Error
    from topologies.model import load_topology

    try:
        build = REPO / "build"
        p4info_path, json_path = compile_program(build)
        from controller.p4info import P4Info

        program = (P4Info.load(p4info_path), json_path)
        fabric = load_topology(TOPOLOGY)
        log_dir = build / "logs" / "bench"
        log_dir.mkdir(parents=True, exist_ok=True)
        settings = [BARE, TESTBED, *(ABLATIONS if args.all else ())]
        rows = []
        for switches in (1, 3):
            runs: dict[str, list[dict]] = {s.name: [] for s in settings}
            for _ in range(args.runs):
                for setting in settings:
                    runs[setting.name].append(measure(setting, switches, fabric, program,
                                                      args.seconds, log_dir))
            for name, results in runs.items():
                row = {**results[0], "pps": round(statistics.median(r["pps"] for r in results)),
                       "sent_pps": round(statistics.median(r["sent_pps"] for r in results)),
                       "runs_pps": [r["pps"] for r in results]}
                row["rss_mb_per_switch"] = max(r["rss_mb_per_switch"] for r in results)
                print(f"{switches} switch(es)  {name:<40} {row['pps']:>8} pkt/s  "
                      f"(runs: {', '.join(map(str, row['runs_pps']))}); "
                      f"{row['rss_mb_per_switch']:g} MB resident per switch", flush=True)
                rows.append(row)
    except (BenchError, Bmv2Error) as err:
        print(f"bmv2_forwarding: {err}", file=sys.stderr)
        return 1
    finally:
        remove_links()
    pps = {(r["switches"], r["setting"]): r["pps"] for r in rows}
    ratios = {n: pps[(n, TESTBED.name)] / pps[(n, BARE.name)] if pps[(n, BARE.name)] else 0.0
              for n in (1, 3)}
    for n, ratio in ratios.items():
        print(f"{n} switch(es): testbed/bare = {ratio:.2f}")
    RESULTS.write_text(json.dumps({"rows": rows, "ratio_testbed_bare": ratios,
                                   "cpus": os.cpu_count(),
                                   "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")},
                                  indent=2) + "\n")
    print(f"figures in {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
