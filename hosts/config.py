"""Protocol settings of the host agents, with defaults that fit the emulated links.

Scenario files may override any of them (`protocol:`); unknown names are an error.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class ProtocolConfig:
    mtu_payload: int = 1200  # payload bytes per DATA packet
    window: int = 64  # packets in flight per connection
    evs_per_plane: int = 8  # active EVs per plane and connection
    ev_min_active: int = 2  # never retire below this many active EVs in a connection
    reorder_tolerance: int = 3  # later packets acked on the same EV before one counts lost
    reorder_min_s: float = 0.002  # floor of the cross-path reordering window (one srtt)
    rto_min_s: float = 0.05  # retransmission timeout floor
    rto_initial_s: float = 0.25  # until the first RTT sample
    rto_max_s: float = 1.0
    probe_initial_s: float = 0.05  # first probe of a retired EV, then doubling
    probe_max_s: float = 0.8
    probes: bool = True  # mrc-no-probe turns them off: retired EVs stay retired
    tick_s: float = 0.002  # timer granularity of the event loop
    ack_every: int = 8  # in-order data packets one SACK may answer (within a receive batch)
    reconvergence_s: float = 1.0  # single-path: emulated routing reconvergence delay
    pace: bool = True  # pace each plane at its link rate (no local queue overflow)
    cc: bool = True  # delay-based congestion window (hosts/cc.py) below `window`
    cwnd_initial: int = 16
    target_delay_s: float = 0.008  # queueing delay the window aims to stay under

    @classmethod
    def with_overrides(cls, overrides: dict | None) -> ProtocolConfig:
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(overrides or {}) - set(known))
        if unknown:
            raise ValueError(f"protocol.{unknown[0]}: unknown setting; known: "
                             f"{', '.join(sorted(known))}")
        return replace(cls(), **(overrides or {}))
