"""Benchmark: agent goodput against the raw-socket limit, and recovery after a link failure.

    sudo .venv/bin/python -m bench.agent_throughput        (or: make bench)

1. Throughput, on a two-host, 8-plane fabric whose links are fast enough (1 Gbit/s)
   that the CPU is the limit, at the default MTU (1,200-byte payloads) and at the
   NICs' (4,096): the fabric's ceiling with a C sender (trafgen, bench/trafgen.py:
   what h1's ports receive), a bare Python UDP blaster (bench/rawsock.py) between the
   two namespaces, over one plane and over all planes; then the MRC agent moving one
   large message over the same paths. Prints packets/s and Mbit/s, in all and per core
   (the machine's cores drive the one agent pair: sender, receiver and the kernel
   between them), the agent/raw, raw/C and agent/C ratios, the agents' largest
   resident memory, and the calibrated budget runs cap their links to
   (experiments/run/calibration.py) at each MTU.
2. Recovery, on 2tier-2plane at its emulated rates: a long transfer h0 -> h3; the link
   under the baseline's hashed path fails half a second in. For `mrc` and `single-path`
   (three runs each, medians) it prints, from per-packet events
   (experiments/analysis/metrics.py, path_failure_recovery): the time from the failure to its
   detection (retirement, or reroute), and to the moment every packet lost in it had
   been delivered, in ms and in round trips; and the goodput of the 100 ms after the
   failure as a fraction of the goodput before. Also the time between two packets of
   one plane at the link rate: a loss shows only when a later packet of its plane is
   acknowledged, so recovery takes at least that gap plus two round trips.
3. Recovery on the simulated network (hosts/simnet.py): the same failure, the same
   protocol code, in virtual time, with the propagation delays the topology declares.
   Where the kernel has no netem, the emulated links have no delay and the round trip
   is only the agents' own latency, shorter than that gap; this part shows the regime
   of real links, whose round trip is many packets long. Labelled "simulated". MRC
   only: the simulated network has no routing to move a single-path flow.

Figures go to stdout (and bench/results.json); nothing here is a test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench import trafgen
from experiments.analysis.metrics import path_failure_recovery, read_events
from experiments.analysis.similarity import delay_emulated, headline, proportions
from experiments.dataplanes.targets import KernelTarget, apply_fault
from experiments.faults import parse_faults
from experiments.run import calibration
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricBusy, FabricLock
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from hosts.baseline import RoceSender
from hosts.config import ProtocolConfig
from hosts.pacing import Pacer
from hosts.protocol import DEFAULT_MTU_PAYLOAD, MRC_HEADER_BYTES, NIC_MTU_PAYLOAD
from hosts.simnet import Chaos, Outage, SimNet
from topologies.addressing import host_address
from topologies.model import load_topology
from topologies.paths import catalogue, path_for_ev
from topologies.shaping import as_emulated_here

REPO = Path(__file__).resolve().parents[1]
SECONDS = 3.0
MTUS = (DEFAULT_MTU_PAYLOAD, NIC_MTU_PAYLOAD)
CORES = os.cpu_count() or 1


def fast_topology(folder: Path, mtu: int) -> Path:
    path = folder / f"bench-fast-{mtu}.yaml"
    link = {"rate_mbit": 1000, "delay_ms": 0, "queue_pkts": 1000}
    path.write_text(yaml.safe_dump({
        "name": "bench-fast", "planes": 8, "racks": 2, "hosts_per_rack": 1, "t1_per_plane": 1,
        "mtu_payload": mtu, "links": {"host_t0": link, "t0_t1": link},
        "ecn_threshold_pkts": 100}))
    return path


def raw_limit(net, fabric, planes: int) -> dict:
    paths = [p for p in catalogue(fabric, 0, 1) if p.plane < planes]
    rx = net.get("h1").popen([sys.executable, "-m", "bench.rawsock", "recv", "--address",
                              host_address(1), "--seconds", str(SECONDS + 1)],
                             cwd=str(REPO), stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    tx = net.get("h0").popen([sys.executable, "-m", "bench.rawsock", "send", "--address",
                              host_address(0), "--dst-addresses",
                              ",".join(p.address for p in paths), "--seconds", str(SECONDS),
                              "--size", str(fabric.spec.mtu_payload + MRC_HEADER_BYTES)],
                             cwd=str(REPO),
                             stdout=subprocess.PIPE, text=True)
    tx.communicate()
    return json.loads(rx.communicate()[0])


def agent_goodput(network, folder: Path, planes: int) -> dict:
    fabric = network.fabric
    size = 48_000_000  # one to three seconds of transport: long enough to be steady
    plan = phases("transfer", {"src": 0, "dst": 1, "message_bytes": size}, fabric)
    # One plane: keep the EV set on plane 0 by taking the other planes' ports away.
    faults = [{"kind": "nic-port-down", "host": "h0", "plane": p, "at_s": 0}
              for p in range(planes, fabric.spec.planes)]
    run = run_transport(network, "mrc", plan, parse_faults(faults, fabric),
                        lambda a: apply_fault(network, a),
                        folder / f"agent-{planes}", 120.0,
                        {"window": 256, "cc": False}, lambda m: None,
                        progress_s=0.002)
    (t,) = run.transfers
    # Transport time: from the first payload byte placed to the last (progress samples of
    # the receiver), without making the message and checking it, which come on top.
    samples = [(e["t"], e["rx_bytes"]) for e in read_events(run.event_files)
               if e.get("event") == "progress" and e.get("host") == 1]
    first = next((ts, rx) for ts, rx in samples if rx > 0)
    last = next(ts for ts, rx in samples if rx >= size)
    moved = size - first[1]
    took = last - first[0]
    return {"ok": t.done and t.verified, "seconds": round(took, 3),
            "end_to_end_s": round(t.fct(), 3),
            "pps": round(moved / fabric.spec.mtu_payload / took),
            "mbps": round(moved * 8 / took / 1e6, 1),
            "max_rss_mb": max(s.get("max_rss_mb", 0.0) for s in run.stats.values())}


def throughput(folder: Path, lock: FabricLock) -> dict:
    return {str(mtu): throughput_at(folder, mtu, lock) for mtu in MTUS}


def throughput_at(folder: Path, mtu: int, lock: FabricLock) -> dict:
    fabric = load_topology(str(fast_topology(folder, mtu)))
    out = {}
    budget = calibration.budget(mtu)
    out["calibrated_mbit_per_core"] = budget.mbit_per_core
    print(f"throughput at {mtu}-byte payloads ({fabric.spec.data_frame_bytes}-byte frames); "
          f"runs cap their links to {budget.mbit_per_core:g} Mbit/s per core "
          f"({budget.source})", flush=True)
    with RunningFabric(fabric, KernelTarget(), lock) as network:
        net = network.net
        for planes in (1, 8):
            # Median of three runs each: the machine's noise is larger than the effects.
            c = c_limit(net, fabric, folder, planes)
            raw = sorted((raw_limit(net, fabric, planes) for _ in range(3)),
                         key=lambda r: r["pps"])[1]
            agent = sorted((agent_goodput(network, folder, planes) for _ in range(3)),
                           key=lambda r: r["pps"])[1]
            ratio = agent["pps"] / raw["pps"] if raw["pps"] else 0.0
            row = out[f"{planes}_plane"] = {
                "raw_pps": round(raw["pps"]), "raw_mbps": round(raw["mbps"], 1),
                "agent": agent, "agent_over_raw": round(ratio, 3),
                "agent_pps_per_core": round(agent["pps"] / CORES),
                "agent_mbps_per_core": round(agent["mbps"] / CORES, 1)}
            ceiling = ""
            if c is not None and not c["pps"]:
                ceiling = "C sender (trafgen): nothing delivered; "
                c = None
            if c is not None:
                row.update({"c_pps": round(c["pps"]), "c_mbps": round(c["mbps"], 1),
                            "raw_over_c": round(raw["pps"] / c["pps"], 3),
                            "agent_over_c": round(agent["pps"] / c["pps"], 3)})
                ceiling = (f"C sender (trafgen) {c['pps']:,.0f} pkt/s {c['mbps']:.0f} "
                           f"Mbit/s delivered; ")
            print(f"throughput, {mtu}-byte payloads, {planes} plane(s): {ceiling}raw socket "
                  f"{raw['pps']:,.0f} pkt/s {raw['mbps']:.0f} Mbit/s; agent "
                  f"{agent['pps']:,} pkt/s {agent['mbps']} Mbit/s goodput "
                  f"({'verified' if agent['ok'] else 'FAILED'}, "
                  f"{agent['end_to_end_s']} s end to end with making and checking the "
                  f"message), per core {row['agent_pps_per_core']:,} pkt/s "
                  f"{row['agent_mbps_per_core']} Mbit/s; agent/raw = {ratio:.2f}"
                  + (f", raw/C = {row['raw_over_c']:.2f}, agent/C = {row['agent_over_c']:.2f}"
                     if c is not None else "")
                  + f"; at most {agent['max_rss_mb']:g} MB resident per agent", flush=True)
    return out


def c_limit(net, fabric, folder: Path, planes: int) -> dict | None:
    """The fabric's ceiling with a C sender (bench/trafgen.py) over the blaster's paths,
    median of three; None, said once, where trafgen is missing."""
    missing = trafgen.available()
    if missing is not None:
        print(f"throughput: no C yardstick: {missing}", flush=True)
        return None
    paths = [p for p in catalogue(fabric, 0, 1) if p.plane < planes]
    size = fabric.spec.mtu_payload + MRC_HEADER_BYTES
    return sorted((trafgen.blast(net, fabric, paths, folder, SECONDS, size)
                   for _ in range(3)), key=lambda r: r["pps"])[1]


def failed_path(fabric):
    """The path of the baseline's hashed flow h0 -> h3, which the recovery runs break,
    and `path_of(ev)`, naming any EV's path the same way: (plane, spine)."""
    base = RoceSender(0, 3, 3, fabric, ProtocolConfig(), lambda e: None, lambda *a: None)
    path = path_for_ev(fabric, 0, 3, base.qps[0].ev)

    def path_of(ev: int) -> tuple[int, int | None]:
        p = path_for_ev(fabric, 0, 3, ev)
        return p.plane, p.spine

    return path, path_of


def plane_gap_ms(fabric) -> float:
    """Time between two full packets of one plane at the host link's rate (paced)."""
    pacer = Pacer(1, fabric.spec.host_t0.rate_mbit, fabric.spec.mtu_payload + MRC_HEADER_BYTES)
    return round(pacer.packet_s * 1000, 3)


def report(label: str, transport: str, r: dict, repeats: int, ok: bool) -> None:
    kept = (f"goodput in the 100 ms after the failure {r['goodput_kept']} of before; "
            if r.get("goodput_kept") is not None else "")
    print(f"{label}, {transport} (median of {repeats}): failure detected after "
          f"{r.get('detect_ms')} ms, every lost packet delivered after "
          f"{r.get('repaired_ms')} ms = {r.get('repaired_rtts')} RTT (RTT median "
          f"{r.get('rtt_median_ms')} ms, min {r.get('rtt_min_ms')} ms); "
          f"{r.get('lost_packets')} packets lost; {kept}all transfers verified: {ok}",
          flush=True)


def recovery(folder: Path, lock: FabricLock, repeats: int = 3) -> dict:
    fabric = as_emulated_here(load_topology("2tier-2plane"))  # as a run does
    path, path_of = failed_path(fabric)
    t0, t1 = fabric.t0(path.plane, 0).name, fabric.t1(path.plane, path.spine).name
    faults = [{"kind": "link-flap", "link": [t0, t1], "at_s": 0.5, "down_s": 30}]
    out = {"failed_link": [t0, t1], "plane_packet_gap_ms": plane_gap_ms(fabric)}
    print(f"recovery: link {t0}-{t1} fails; one packet per plane every "
          f"{out['plane_packet_gap_ms']} ms at {fabric.spec.host_t0.rate_mbit:g} Mbit/s",
          flush=True)

    with RunningFabric(fabric, KernelTarget(), lock) as network:
        # The proportions that decide recovery (experiments/analysis/similarity.py), as every run
        # and every `make paper` row prints them.
        plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": 8_000_000}, fabric)
        block = proportions(fabric, {"packet_events": True}, parse_faults(faults, fabric),
                            plan, delay_emulated(fabric, network.features.netem))
        out["similarity"] = block
        print(f"recovery: {headline(block)}", flush=True)
        for transport in ("mrc", "single-path"):
            runs = []
            for i in range(repeats):
                plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": 8_000_000}, fabric)
                run = run_transport(network, transport, plan, parse_faults(faults, fabric),
                                    lambda a: apply_fault(network, a),
                                    folder / f"recovery-{transport}-{i}", 60.0,
                                    {"packet_events": True}, lambda m: None,
                                    progress_s=0.005)
                events = read_events(run.event_files)
                figures = path_failure_recovery(events, 0, 3, (path.plane, path.spine),
                                                path_of) or {}
                figures["ok"] = all(t.done and t.verified for t in run.transfers)
                if "failed_at" in figures:
                    figures["goodput_kept"] = goodput_kept(events, 3, figures.pop("failed_at"))
                runs.append(figures)
            out[transport] = {"runs": runs, "median": medians(runs)}
            report("recovery", transport, out[transport]["median"], repeats,
                   all(x["ok"] for x in runs))
    return out


def recovery_simulated(folder: Path, repeats: int = 5) -> dict:
    fabric = load_topology("2tier-2plane")
    spec = fabric.spec
    path, path_of = failed_path(fabric)
    # h0 -> T0 -> T1 -> T0 -> h3: two links of each tier. A little jitter (5%), so the
    # paths of a plane reorder as real ones do.
    one_way = 2 * (spec.host_t0.delay_ms + spec.t0_t1.delay_ms) / 1000
    out = {"one_way_delay_ms": one_way * 1000}
    print(f"recovery, simulated: the same failure on the simulated network, one-way "
          f"delay {one_way * 1000:g} ms as the topology declares", flush=True)
    # MRC only: the simulated network has no routing, and a single-path flow recovers
    # only when routing moves it (experiments/dataplanes/reroute.py, in the emulated runs above).
    for transport in ("mrc",):
        runs = []
        for i in range(repeats):
            # The failure lands at a different point of the packet train each run.
            outage = Outage(path.plane, path.spine, start=0.5 + i * 0.00037)
            net = SimNet(fabric, transport, Chaos(delay_s=one_way, jitter_s=0.05 * one_way),
                         [outage], seed=i + 1, protocol={"packet_events": True})
            net.send(0, 3, 0, 8_000_000)
            net.run(60.0, lambda net=net: net.all_done([(0, 3, 0)]))
            figures = path_failure_recovery(net.events, 0, 3, (path.plane, path.spine),
                                            path_of) or {}
            figures.pop("failed_at", None)
            figures["ok"] = net.all_done([(0, 3, 0)])
            runs.append(figures)
        out[transport] = {"runs": runs, "median": medians(runs)}
        report("recovery, simulated", transport, out[transport]["median"], repeats,
               all(x["ok"] for x in runs))
    return out


def goodput_kept(events: list[dict], receiver: int, failed_at: float,
                 after_s: float = 0.1) -> float | None:
    """The receiver's goodput in the `after_s` seconds after the failure, as a fraction
    of its goodput in the 300 ms before."""
    samples = [(e["t"], e["rx_bytes"]) for e in events
               if e.get("event") == "progress" and e.get("host") == receiver]

    def rate(lo: float, hi: float) -> float:
        inside = [(t, b) for t, b in samples if lo <= t <= hi]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    before = rate(failed_at - 0.3, failed_at)
    return round(rate(failed_at, failed_at + after_s) / before, 3) if before else None


def medians(runs: list[dict]) -> dict:
    keys = {k for r in runs for k, v in r.items() if isinstance(v, (int, float))
            and not isinstance(v, bool)}
    out = {}
    for key in sorted(keys):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = round(statistics.median(values), 3) if values else None
    return out


def main() -> int:
    """The parts named on the command line (all by default), under the machine's fabric
    lock for the whole bench: a run or a CLI up now is left alone, and refused here."""
    parts = {"throughput": throughput, "recovery": recovery,
             "recovery-simulated": lambda folder, lock: recovery_simulated(folder)}
    chosen = sys.argv[1:] or list(parts)
    try:
        with FabricLock("make bench") as lock, tempfile.TemporaryDirectory() as tmp:
            results = {name: parts[name](Path(tmp), lock) for name in chosen}
    except FabricBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    (REPO / "bench" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
