"""The proportions that decide a result, for every run, beside the paper's regime (pure).

An emulated fabric runs at Mbit/s where the MRC paper's ran at 400 Gb/s. A result
carries over when what decides it keeps its proportions: queues and thresholds in
bandwidth-delay products, timers in round trips, a fault's length in round trips and
in transfer times, packets per EV. `proportions()` computes them from the fabric a run
built (its rate cap included), the protocol settings the agents use
(hosts/endpoint.py `link_adjusted`), the fault timeline and the workload, and, where
known, the agents' measured lag; each number has the band of the paper's regime
(`BANDS`, docs/similarity.md gives the sources) and is marked when it falls outside.
summary.json gets the result as `similarity`, report.md's first section shows it, and
`make paper` refuses a verdict on a row whose deciding numbers are out of band.
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts.config import ProtocolConfig
from hosts.endpoint import link_adjusted
from topologies import scale
from topologies.model import Fabric


@dataclass(frozen=True)
class Band:
    """Where a number lies in the regime the paper's results come from."""

    low: float | None
    high: float | None
    unit: str
    why: str  # the source, in a few words (docs/similarity.md says more)
    deciding: bool = True  # a verdict that depends on it means nothing outside

    def holds(self, value: float) -> bool:
        return ((self.low is None or value >= self.low)
                and (self.high is None or value <= self.high))


BANDS = {
    "bdp_frames": Band(4, None, "frames", "fewer frames per BDP leave no queue to speak of "
                       "between empty and full"),
    "queue_bdp": Band(2, 8, "BDP", "a switch port's buffer: tail drop at 2-8 BDP"),
    "ecn_kmin_bdp": Band(0.1, 0.8, "BDP", "ECN marks from well under a BDP (UEC, DCQCN "
                         "deployments)"),
    "ecn_kmax_bdp": Band(0.2, 1.5, "BDP", "every packet marked by about a BDP"),
    "trim_bdp": Band(0.5, 2, "BDP", "trimming at about one BDP of queue (UEC)"),
    "trim_lasthop_bdp": Band(0.5, 3, "BDP", "the last hop absorbs a burst first"),
    "rto_min_rtt": Band(2, 100, "RTT", "a retransmission timeout of a few to tens of "
                        "round trips: shorter mistakes queueing for loss"),
    "rto_initial_rtt": Band(2, 200, "RTT", "the first timeout, before any sample"),
    "probe_initial_rtt": Band(1, 100, "RTT", "a retired path is probed within tens of "
                              "round trips (the paper: probes as a background task)"),
    "ack_delay_rtt": Band(None, 0.5, "RTT", "a NIC holds an ack for company a fraction "
                          "of a round trip", deciding=False),
    "frames_per_ev": Band(10, None, "frames", "each EV must carry enough packets for its "
                          "losses to show", deciding=False),
    "agent_lag_p99_rtt": Band(None, 0.5, "RTT", "the agents react within half a round "
                              "trip: a NIC reacts in microseconds"),
}


def delay_emulated(fabric: Fabric, netem: bool) -> bool:
    """Whether the links carry the delays the fabric says: netem is there, or there are
    none to carry (a run without netem runs the fabric without them:
    experiments/run/lifecycle.py)."""
    spec = fabric.spec
    return netem or spec.host_t0.delay_ms == spec.t0_t1.delay_ms == 0


def agents_lag_p99_ms(blocks) -> float | None:
    """The agents' worst timer lag (p99, ms) over the MRC transports' summary blocks
    (experiments/analysis/metrics.py), or every transport's where none is MRC (a row of
    RoCE alone: its DCQCN timers must keep time too): the `agent_lag_p99_rtt` a run's
    proportions are judged by; None when no block reports it."""
    mrc = [b for b in blocks if b["transport"].startswith("mrc")]
    lags = [b["event_loop"]["lag_p99_ms"] for b in mrc or blocks if b.get("event_loop")]
    return max(lags) if lags else None


def _number(name: str, value: float | None) -> dict:
    band = BANDS[name]
    entry = {"value": None if value is None else round(value, 3), "unit": band.unit,
             "band": [band.low, band.high]}
    if value is not None and not band.holds(value):
        entry["out_of_band"] = True
    return entry


def proportions(fabric: Fabric, protocol: dict | None, steps=(), plan=(),
                delay_emulated: bool = True, lag_p99_ms: float | None = None) -> dict:
    """The `similarity` block of a run on `fabric` (its capped form) with the scenario's
    `protocol` settings, fault `steps` and workload `plan` (phases of transfers)."""
    spec = fabric.spec
    rtt = spec.base_rtt_s
    if not delay_emulated:  # the links carry no delay: only serialization is left
        rtt = scale.base_rtt_s(spec.host_t0.rate_mbit, spec.t0_t1.rate_mbit, 0.0, 0.0,
                               spec.data_frame_bytes)
    bdp = scale.bdp_frames(spec.host_t0.rate_mbit, rtt, spec.data_frame_bytes)
    config = link_adjusted(ProtocolConfig.with_overrides(protocol), fabric)
    queue = min(spec.host_t0.queue_pkts, spec.t0_t1.queue_pkts)
    transfers = [t for phase in plan for t in phase]
    numbers = {
        "bdp_frames": _number("bdp_frames", bdp),
        "queue_bdp": _number("queue_bdp", queue / bdp),
        "ecn_kmin_bdp": _number("ecn_kmin_bdp", spec.ecn_threshold_pkts / bdp),
        "ecn_kmax_bdp": _number("ecn_kmax_bdp", spec.ecn_kmax / bdp),
        "trim_bdp": _number("trim_bdp", spec.trim_threshold_pkts / bdp),
        "trim_lasthop_bdp": _number("trim_lasthop_bdp", spec.trim_lasthop / bdp),
        "rto_min_rtt": _number("rto_min_rtt", config.rto_min_s / rtt),
        "rto_initial_rtt": _number("rto_initial_rtt", config.rto_initial_s / rtt),
        "probe_initial_rtt": _number("probe_initial_rtt", config.probe_initial_s / rtt),
        # hosts/endpoint.py holds SACKs in round trips of the fabric as specified.
        "ack_delay_rtt": _number("ack_delay_rtt", config.ack_delay_rtts * spec.base_rtt_s / rtt),
        "frames_per_ev": _number("frames_per_ev", _frames_per_ev(config, spec.planes, plan)),
        "agent_lag_p99_rtt": _number("agent_lag_p99_rtt",
                                     None if lag_p99_ms is None else lag_p99_ms / 1000 / rtt),
    }
    block = {
        "base_rtt_ms": round(rtt * 1000, 3),
        "delay_emulated": delay_emulated,
        "numbers": numbers,
        "faults": _faults(list(steps), rtt, transfers, spec),
    }
    block["out_of_band"] = sorted(n for n, e in numbers.items() if e.get("out_of_band"))
    block["deciding_out_of_band"] = [n for n in block["out_of_band"] if BANDS[n].deciding]
    if not delay_emulated:
        block["note"] = ("the links' delays are not emulated (no netem): the round trip is "
                         "serialization only")
    return block


def frames_per_ev(fabric: Fabric, protocol: dict | None, plan) -> float | None:
    """The frames each EV of the smallest transfer of `plan` carries on `fabric` with
    the scenario's `protocol` settings (None: no transfers)."""
    config = link_adjusted(ProtocolConfig.with_overrides(protocol), fabric)
    return _frames_per_ev(config, fabric.spec.planes, plan)


def _frames_per_ev(config: ProtocolConfig, planes: int, plan) -> float | None:
    frames = [t.size / (config.mtu_payload or 1) for phase in plan for t in phase]
    evs = config.evs_for(planes)
    return min(frames) / evs if frames and evs else None


def _faults(steps: list, rtt: float, transfers, spec) -> list[dict]:
    """When each fault falls and how long it lasts (its down step to its up step), in
    round trips and as a share of the time the largest transfer takes at the host's
    full rate."""
    largest = max((t.size for t in transfers), default=0)
    transfer_s = largest * 8 / (spec.host_line_rate_mbit * 1e6) if largest else 0
    out = []
    for i, step in enumerate(steps):
        if step.up:
            continue
        entry = {"kind": step.kind, "at_rtt": round(step.t / rtt, 1)}
        back = next((s for s in steps[i + 1:] if s.up and s.fault == step.fault), None)
        if back is not None:
            entry["duration_rtt"] = round((back.t - step.t) / rtt, 1)
            if transfer_s:
                entry["duration_of_transfer"] = round((back.t - step.t) / transfer_s, 3)
        out.append(entry)
    return out


def headline(block: dict) -> str:
    """report.md's first line about proportions."""
    deciding = block.get("deciding_out_of_band", [])
    if not deciding:
        return ("Proportions: within the paper's regime (queues, thresholds and timers in "
                "BDPs and round trips: docs/similarity.md).")
    shown = ", ".join(f"{name} {block['numbers'][name]['value']:g} "
                      f"{block['numbers'][name]['unit']}" for name in deciding)
    return (f"Proportions out of the paper's regime: {shown} (docs/similarity.md says what "
            "to change: a faster rate cap, fewer planes or hosts, the kernel data plane).")


def table(block: dict) -> list[str]:
    """report.md lines: each number beside its band."""
    lines = ["| number | this run | the paper's regime |", "|---|---|---|"]
    for name, entry in block["numbers"].items():
        if entry["value"] is None:
            continue
        low, high = entry["band"]
        band = (f"{low:g}-{high:g}" if low is not None and high is not None
                else f">= {low:g}" if low is not None else f"<= {high:g}")
        mark = " **out of band**" if entry.get("out_of_band") else ""
        lines.append(f"| {name} | {entry['value']:g} {entry['unit']}{mark} | "
                     f"{band} {entry['unit']} |")
    return lines
