"""A fabric's proportions: its base round trip, its bandwidth-delay product, and the
queue thresholds that follow from them (pure).

An emulated fabric runs at Mbit/s where the MRC paper's ran at 400 Gb/s. What carries
across the rates is proportion: a queue or a marking threshold counted in
bandwidth-delay products (BDP), a timer in round trips. This module is the one home of
that arithmetic and of the rule that derives a topology's thresholds from it
(`thresholds`), used when a topology file leaves them out (topologies/model.py) and when
a fabric's rates are capped (`model.with_rate_cap` keeps every queue and threshold the
same number of BDPs). experiments/analysis/similarity.py reports the proportions of every run.

The base round trip is the longest path's with empty queues: a full DATA frame over the
four links host -> T0 -> T1 -> T0 -> host and a control packet back, each link adding
its propagation delay and, store and forward, the time to serialize the packet. The
BDP is what one NIC port (one plane) sends in that time, in full DATA frames.

The rule, from the regimes UEC and the paper's fabrics use (docs/similarity.md has the
sources): ECN marks from a quarter of a BDP (Kmin) rising to every packet at three
quarters (Kmax); trimming starts at one BDP on a fabric port and at one and a half on a
port facing a host (the last hop absorbs an incast's burst before it trims). Each is at
least a frame more than the one before, so RED has a ramp and a marked queue has room
before it trims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hosts.protocol import CONTROL_PACKET_BYTES, frame_bytes

# The rule's proportions, in BDPs.
ECN_KMIN_BDP = 0.25
ECN_KMAX_BDP = 0.75
TRIM_BDP = 1.0
TRIM_LASTHOP_BDP = 1.5
# Links on the longest path, each way: host -> T0 -> T1 -> T0 -> host.
HOPS = 4


def serialization_s(frame: int, rate_mbit: float) -> float:
    return frame * 8 / (rate_mbit * 1e6)


def base_rtt_s(host_rate_mbit: float, fabric_rate_mbit: float, host_delay_ms: float,
               fabric_delay_ms: float, frame: int) -> float:
    """The longest path's round trip with empty queues (module docstring), for full
    DATA frames of `frame` bytes (TopologySpec.data_frame_bytes)."""
    ack = frame_bytes(CONTROL_PACKET_BYTES)
    propagation = 2 * (2 * host_delay_ms + 2 * fabric_delay_ms) / 1000
    out = 2 * serialization_s(frame, host_rate_mbit) \
        + 2 * serialization_s(frame, fabric_rate_mbit)
    back = 2 * serialization_s(ack, host_rate_mbit) + 2 * serialization_s(ack, fabric_rate_mbit)
    return propagation + out + back


def bdp_frames(host_rate_mbit: float, rtt_s: float, frame: int) -> float:
    """What one NIC port sends in a round trip, in full DATA frames of `frame` bytes."""
    return host_rate_mbit * 1e6 / 8 * rtt_s / frame


@dataclass(frozen=True)
class Thresholds:
    """A switch port's marking and trimming thresholds, in packets of full frames."""

    ecn_kmin: int
    ecn_kmax: int
    trim: int  # a port between switches
    trim_lasthop: int  # a port facing a host


def thresholds(bdp: float) -> Thresholds:
    """The rule (module docstring) for a fabric whose BDP is `bdp` frames."""
    kmin = max(1, round(ECN_KMIN_BDP * bdp))
    kmax = max(kmin + 1, round(ECN_KMAX_BDP * bdp))
    trim = max(kmax + 1, round(TRIM_BDP * bdp))
    return Thresholds(kmin, kmax, trim, max(trim, round(TRIM_LASTHOP_BDP * bdp)))


def scaled_queue(packets: int, ratio: float, least: int) -> int:
    """A queue kept as near as can be to the same number of BDPs when the BDP changes by
    `ratio`, never below `least`: rounded, not up, as a fabric may be rescaled several
    times over (an MTU, no delay, a rate cap) and rounding up each time adds a frame."""
    return max(least, round(packets * ratio))


def scaled(packets: int, ratio: float, least: int = 1) -> int:
    """A threshold of `packets` kept at the same number of BDPs when the BDP
    changes by `ratio`, never below `least`."""
    return max(least, math.ceil(packets * ratio - 1e-9))
