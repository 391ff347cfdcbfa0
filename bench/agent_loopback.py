"""Benchmark without root: the agent's packet path on the loopback, against a raw socket.

    .venv/bin/python -m bench.agent_loopback [--planes 1,8] [--mtu 1200,4096]
        [--bytes 24000000] [--repeats 3] [--profile DIR] [--json FILE]

Two agents (hosts/agent.py: the real Agent, its event loop, sockets, batched I/O and
transport) run as two processes on ::1, one UDP socket per plane on a port of its own
(LoopbackAgent maps paths and sources to ports instead of uSID addresses), and move one
large message from host 0 to host 1 on a two-host fabric of 1 or 8 planes whose links
(10 Gbit/s) are faster than the CPU. Goodput is taken from the receiver's progress
samples, from the first payload byte placed to the last, as bench/agent_throughput.py
does under Mininet. The reference is bench/rawsock.py between two processes on the same
loopback, with datagrams of the same size, measured in the same invocation: the ratio
agent/raw is what to compare between versions of the agent; the absolute rates are this
machine's. With --profile, each agent writes a cProfile of its run into DIR.

Nothing here needs root or Mininet; each measurement runs a few seconds on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hosts.agent import Agent, AgentConfig
from hosts.netio import PlaneSockets, set_traffic_class
from hosts.protocol import MRC_HEADER_BYTES, ev_plane, transport_spec
from topologies.model import Fabric, build_fabric, parse_spec
from topologies.resolved import write_resolved_topology

REPO = Path(__file__).resolve().parents[1]
ADDRESS = "::1"
BASE_PORT = 47000  # host h, plane p listens on BASE_PORT + h * PORTS_PER_HOST + p
PORTS_PER_HOST = 32
RAW_PORT = BASE_PORT - 100
RATE_MBIT = 10_000  # faster than the agents can go: the CPU is the limit


def loopback_fabric(planes: int, hosts: int = 2, rate_mbit: float = RATE_MBIT) -> Fabric:
    """`hosts` hosts, two a rack (one when two), `planes` planes of two T1s (one for
    two hosts), links of `rate_mbit` (by default faster than the CPU)."""
    link = {"rate_mbit": rate_mbit, "delay_ms": 0, "queue_pkts": 1000}
    per_rack = 1 if hosts == 2 else 2
    return build_fabric(parse_spec({
        "name": "bench-loopback", "planes": planes, "racks": hosts // per_rack,
        "hosts_per_rack": per_rack, "t1_per_plane": 1 if hosts == 2 else 2,
        "links": {"host_t0": link, "t0_t1": link}, "ecn_threshold_pkts": 100},
        "<bench/agent_loopback.py>"))


def port_of(base: int, host: int, plane: int) -> int:
    return base + host * PORTS_PER_HOST + plane


class NoCarrierEvents:
    """The loopback has no plane interfaces to watch: carrier is always there."""

    def __init__(self):
        self.sock, self._peer = socket.socketpair()

    def fileno(self) -> int:
        return self.sock.fileno()

    @staticmethod
    def has_carrier(intf: str) -> bool:
        return True

    def events(self) -> list:
        return []

    def close(self) -> None:
        self.sock.close()
        self._peer.close()


class LoopbackAgent(Agent):
    """The agent with its plane sockets on ::1 ports: a path's EV names the peer's
    socket of its plane, and a source's port names its host."""

    def __init__(self, config: AgentConfig, base: int = BASE_PORT):
        self.base = base
        fabric = config.fabric()
        classes = fabric.spec.traffic_classes
        data_class = transport_spec(config.transport).data_class
        socks = []
        for plane in range(fabric.spec.planes):
            sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            set_traffic_class(sock, classes[data_class])
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
            sock.bind((ADDRESS, port_of(base, config.host, plane)))
            sock.setblocking(False)
            socks.append(sock)
        largest = MRC_HEADER_BYTES + int(config.protocol.get("mtu_payload", 1 << 13))
        super().__init__(config, PlaneSockets(socks, classes, data_class,
                                              max_datagram=largest), NoCarrierEvents())

    def address_of(self, dst: int, ev: int) -> tuple[str, int]:
        return ADDRESS, port_of(self.base, dst, ev_plane(ev))

    def host_of(self, address: str, port: int = 0) -> int | None:
        host, plane = divmod(port - self.base, PORTS_PER_HOST)
        if address != ADDRESS or not 0 <= host < len(self.fabric.hosts) or host == self.me:
            return None
        return host


class AgentProcess:
    """One agent process, driven over its control channel as experiments/run/agents.py
    drives the real ones."""

    def __init__(self, config: Path, base: int, profile: Path | None):
        args = [sys.executable, "-m", "bench.agent_loopback", "--serve", str(config),
                "--base", str(base)]
        if profile is not None:
            args += ["--profile", str(profile)]
        self.proc = subprocess.Popen(args, cwd=str(REPO), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def command(self, **cmd) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def wait(self, event: str, timeout_s: float = 120.0) -> dict:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"agent exited ({self.proc.wait()}) waiting for {event}")
            message = json.loads(line)
            if message.get("event") == event:
                return message
            if message.get("event") == "error":
                raise RuntimeError(message["message"])
        raise TimeoutError(f"no {event} in {timeout_s} s")

    def cpu(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the agent process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def stop(self) -> dict:
        self.command(cmd="stats")
        stats = self.wait("stats")
        stats["cpu_user_s"], stats["cpu_sys_s"] = self.cpu()
        self.command(cmd="quit")
        self.proc.wait(10)
        return stats


def goodput(samples: list[tuple[float, int]], size: int, payload: int) -> dict:
    """Packets/s and Mbit/s of payload from a receiver's progress samples (time, bytes
    received): from the first sample with payload to the first with all of it."""
    first = next((t, b) for t, b in samples if b > 0)
    last = next(t for t, b in samples if b >= size)
    moved, took = size - first[1], last - first[0]
    return {"seconds": round(took, 3), "pps": round(moved / payload / took),
            "mbps": round(moved * 8 / took / 1e6, 1)}


def agent_goodput(folder: Path, planes: int, size: int, mtu: int,
                  profile: Path | None = None, base: int = BASE_PORT) -> dict:
    fabric = loopback_fabric(planes)
    topology = folder / "topology.json"
    write_resolved_topology(topology, fabric)
    agents = {}
    try:
        for host in (1, 0):
            config = folder / f"h{host}.json"
            config.write_text(json.dumps({
                "host": host, "topology": str(topology), "transport": "mrc",
                "events": str(folder / f"events-h{host}.jsonl"),
                "protocol": {"mtu_payload": mtu, "window": 256, "cc": "off"},
                "progress_s": 0.002}))
            agents[host] = AgentProcess(config, base, None if profile is None
                                        else profile / f"h{host}-{planes}p-{mtu}.prof")
            agents[host].wait("ready")
        agents[0].command(cmd="send", dst=1, msg_id=0, bytes=size)
        verified = agents[1].wait("delivered")["verified"]
        agents[0].wait("completed")
        stats = {host: agent.stop() for host, agent in agents.items()}
    finally:
        for agent in agents.values():
            if agent.proc.poll() is None:
                agent.proc.kill()
                agent.proc.wait()
    samples = [(e["t"], e["rx_bytes"]) for e in map(json.loads, (
        folder / "events-h1.jsonl").read_text().splitlines()) if e.get("event") == "progress"]
    out = goodput(samples, size, mtu)
    out["verified"] = verified
    out["event_loop"] = {f"h{h}": s.get("event_loop") for h, s in stats.items()}
    return out


def raw_limit(datagram: int, seconds: float = 1.5) -> dict:
    """bench/rawsock.py from one loopback socket to another, datagrams of this size."""
    rx = subprocess.Popen([sys.executable, "-m", "bench.rawsock", "recv", "--address",
                           ADDRESS, "--port", str(RAW_PORT), "--seconds", str(seconds + 1)],
                          cwd=str(REPO), stdout=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("the raw receiver did not start")
        subprocess.run([sys.executable, "-m", "bench.rawsock", "send", "--address", ADDRESS,
                        "--dst-addresses", ADDRESS, "--port", str(RAW_PORT), "--bind-port",
                        str(RAW_PORT + 1), "--seconds", str(seconds), "--size",
                        str(datagram)], cwd=str(REPO), check=True, stdout=subprocess.DEVNULL)
        return json.loads(rx.communicate(timeout=30)[0])
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


def measure(planes: int, mtu: int, size: int, repeats: int,
            profile: Path | None = None) -> dict:
    """Median of `repeats` agent runs and of as many raw runs, interleaved."""
    agents, raws = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            agents.append(agent_goodput(Path(tmp), planes, size, mtu, profile))
        raws.append(raw_limit(mtu + MRC_HEADER_BYTES))
    agent = sorted(agents, key=lambda r: r["pps"])[len(agents) // 2]
    raw_pps = statistics.median(r["pps"] for r in raws)
    return {"planes": planes, "mtu_payload": mtu, "agent": agent,
            "agent_pps_runs": [r["pps"] for r in agents],
            "raw_pps": round(raw_pps), "raw_pps_runs": [round(r["pps"]) for r in raws],
            "agent_over_raw": round(agent["pps"] / raw_pps, 3) if raw_pps else 0.0}


def all_to_all(folder: Path, hosts: int, planes: int, rate_mbit: float, size: int, mtu: int,
               profile: Path | None = None, base: int = BASE_PORT) -> dict:
    """Every host sends `size` bytes to every other at once, on links of `rate_mbit`:
    the regime of a capped emulation (many peers, a few packets per turn of the loop).
    Returns the agents' CPU time per DATA packet and the payload they moved per CPU
    second (what one core drives), with their event loop lag."""
    fabric = loopback_fabric(planes, hosts, rate_mbit)
    topology = folder / "topology.json"
    write_resolved_topology(topology, fabric)
    agents: dict[int, AgentProcess] = {}
    try:
        for host in range(hosts):
            config = folder / f"h{host}.json"
            config.write_text(json.dumps({
                "host": host, "topology": str(topology), "transport": "mrc", "events": "",
                "protocol": {"mtu_payload": mtu}}))
            agents[host] = AgentProcess(config, base, None if profile is None else
                                        profile / f"h{host}-all-to-all-{planes}p-{mtu}.prof")
        for agent in agents.values():
            agent.wait("ready")
        before = {}
        for host, agent in agents.items():
            agent.command(cmd="stats")
            before[host] = agent.wait("stats")
        start = time.monotonic()
        for host, agent in agents.items():
            for msg_id, dst in enumerate(d for d in range(hosts) if d != host):
                agent.command(cmd="send", dst=dst, msg_id=msg_id, bytes=size)
        verified = all(agent.wait("delivered")["verified"] for agent in agents.values()
                       for _ in range(hosts - 1))
        took = time.monotonic() - start
        after = {host: agent.stop() for host, agent in agents.items()}
    finally:
        for agent in agents.values():
            if agent.proc.poll() is None:
                agent.proc.kill()
                agent.proc.wait()
    cpu = sum(after[h]["cpu_s"] - before[h]["cpu_s"] for h in agents)
    packets = sum(after[h].get("data_tx", 0) - before[h].get("data_tx", 0) for h in agents)
    payload_bits = hosts * (hosts - 1) * size * 8
    return {"hosts": hosts, "planes": planes, "rate_mbit": rate_mbit, "mtu_payload": mtu,
            "verified": verified, "seconds": round(took, 3), "cpu_s": round(cpu, 3),
            "data_packets": packets,
            "cpu_us_per_packet": round(cpu / packets * 1e6, 2) if packets else None,
            "mbit_per_cpu_s": round(payload_bits / cpu / 1e6, 1) if cpu else None,
            "cpu_sys_share": round(sum(a["cpu_sys_s"] for a in after.values())
                                   / sum(a["cpu_user_s"] + a["cpu_sys_s"]
                                         for a in after.values()), 2),
            "lag_p99_ms": max(a["event_loop"]["lag_ms"]["p99"] for a in after.values()),
            "turn_p99_ms": max(a["event_loop"]["turn_ms"]["p99"] for a in after.values())}


def serve(config: str, base: int, profile: str | None) -> int:
    """One agent process (what AgentProcess starts)."""
    agent = LoopbackAgent(AgentConfig.load(config), base)
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        try:
            return profiler.runcall(agent.run)
        finally:
            profiler.dump_stats(profile)
    return agent.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_loopback")
    parser.add_argument("--planes", default="1,8")
    parser.add_argument("--mtu", default="1200", help="payload bytes per DATA packet")
    parser.add_argument("--bytes", type=int, default=24_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="folder for the agents' cProfiles")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--all-to-all", type=int, metavar="HOSTS",
                        help="instead: HOSTS agents, all-to-all on links of --rate")
    parser.add_argument("--rate", type=float, default=20.0, help="Mbit/s (--all-to-all)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--base", type=int, default=BASE_PORT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.base, args.profile and str(args.profile))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    results = []
    if args.all_to_all:
        for mtu in map(int, args.mtu.split(",")):
            for planes in map(int, args.planes.split(",")):
                with tempfile.TemporaryDirectory() as tmp:
                    r = all_to_all(Path(tmp), args.all_to_all, planes, args.rate,
                                   args.bytes, mtu, args.profile)
                results.append(r)
                print(f"loopback all-to-all, {r['hosts']} hosts, {planes} plane(s) at "
                      f"{args.rate:g} Mbit/s, {mtu}-byte payloads: {r['seconds']} s, agents' "
                      f"CPU {r['cpu_us_per_packet']} us per DATA packet, "
                      f"{r['mbit_per_cpu_s']} Mbit/s of payload per CPU second "
                      f"({r['cpu_sys_share']:.0%} in the kernel); loop lag p99 "
                      f"{r['lag_p99_ms']} ms, turn p99 {r['turn_p99_ms']} ms "
                      f"({'verified' if r['verified'] else 'FAILED'})", flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
        return 0
    for mtu in map(int, args.mtu.split(",")):
        for planes in map(int, args.planes.split(",")):
            r = measure(planes, mtu, args.bytes, args.repeats, args.profile)
            results.append(r)
            a = r["agent"]
            print(f"loopback, {planes} plane(s), {mtu}-byte payloads: agent {a['pps']:,} "
                  f"pkt/s {a['mbps']} Mbit/s ({'verified' if a['verified'] else 'FAILED'}); "
                  f"raw socket {r['raw_pps']:,} pkt/s; agent/raw = {r['agent_over_raw']:.2f} "
                  f"(agent runs {r['agent_pps_runs']}, raw runs {r['raw_pps_runs']})",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
