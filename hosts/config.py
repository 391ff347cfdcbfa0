"""Protocol settings of the host agents, with defaults that fit the emulated links.

Scenario files may override any of them (`protocol:`); unknown names and values out of
range are a `ConfigError` naming the setting ("protocol.window: ...").
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields, replace

from hosts.protocol import DEFAULT_MTU_PAYLOAD, MAX_PAYLOAD

# The paper's senders draw 128-256 EVs per connection, over planes of up to 256 paths.
# The emulated planes have 1-4 paths, where 128 EVs would only repeat each path dozens of
# times and slow down the per-EV loss detection (a loss shows when later packets on the
# same EV are acknowledged). So with evs_per_plane = 0 a plane gets AUTO_EVS_PER_PATH EVs
# per path, at least AUTO_MIN_EVS_PER_PLANE (enough that retiring one path never runs
# into the ev_min_active floor), and a connection never more than MAX_EVS_PER_CONNECTION.
AUTO_EVS_PER_PATH = 4
AUTO_MIN_EVS_PER_PLANE = 8
MAX_EVS_PER_CONNECTION = 256

# The default interval of reverse-EV probes; on slow links the agent makes it longer
# (hosts/endpoint.py `link_adjusted`), a scenario's own value it keeps.
REVERSE_PROBE_S = 0.05

CC_KINDS = ("nscc", "delay", "off")  # the congestion windows of hosts/cc.py


class ConfigError(ValueError):
    """A protocol setting with an unknown name or a value out of range."""


@dataclass(frozen=True)
class ProtocolConfig:
    mtu_payload: int = DEFAULT_MTU_PAYLOAD  # payload bytes per DATA packet
    window: int = 64  # packets in flight per connection (the congestion window's cap)
    evs_per_plane: int = 0  # active EVs per plane and connection; 0: from the catalogue
    ev_seed: int = 0  # EV sets are drawn from this seed and the connection's identity
    ev_min_active: int = 2  # never retire below this many usable active EVs
    reorder_tolerance: int = 3  # later packets acked on the same EV before one counts lost
    reorder_min_s: float = 0.002  # floor of the cross-path reordering window (one srtt)
    # How much later than a packet one of its plane must have been sent, and acked, to
    # show it late; its path's srtt + 4 rttvar decides when it counts as lost.
    plane_reorder_min_s: float = 0.0001
    rto_min_s: float = 0.05  # retransmission timeout floor
    rto_initial_s: float = 0.25  # until the first RTT sample
    rto_max_s: float = 1.0
    probe_initial_s: float = 0.05  # first probe of a retired path, then doubling
    probe_max_s: float = 0.8
    probes: bool = True  # mrc-no-probe turns them off: retired EVs stay retired
    # EV probes of the reverse set (hosts/reverse.py), per plane and peer: a receiver of
    # seven peers on eight planes sends over a thousand a second at 50 ms; at 5 ms its
    # probes and their replies filled a 2.5 Mbit/s host link and its agent's CPU.
    reverse_probe_s: float = REVERSE_PROBE_S
    tick_s: float = 0.002  # timer granularity of the event loop
    ack_every: int = 8  # in-order data packets one SACK may answer (within a receive batch)
    reconvergence_s: float = 1.0  # baselines: BGP reconvergence after a remote failure
    local_failover_s: float = 0.005  # baselines: ECMP failover after a failure next door
    # Baselines: timeouts in a row without progress after which a queue pair moves to
    # the error state, as a verbs QP's retry_cnt (7, the most it takes); -1: never.
    qp_retry_count: int = 7
    # Baselines: DCQCN (hosts/baseline.py, docs/protocol.md "DCQCN"), scaled to the
    # emulated fabric: alpha's gain (DCQCN: 1/256 at a 55 us period), the period of its
    # alpha and rate-increase timer (at most one cut per period or round trip), the
    # recovery steps before additive increase, the increase as a share of the line
    # rate, the rate's floor, and the receiver's least gap between two CNPs of a QP.
    dcqcn_g: float = 1 / 16
    dcqcn_period_s: float = 0.004
    dcqcn_fast_steps: int = 5
    dcqcn_ai: float = 0.05
    dcqcn_min_rate: float = 0.01
    cnp_interval_s: float = 0.001
    pace: bool = True  # pace each plane at its link rate (no local queue overflow)
    # Congestion window below `window` (hosts/cc.py): nscc, delay or off (true and
    # false, as older scenario files say, mean delay and off). nscc is the default since
    # its delay ceiling (nscc_qa_delay_s) bounds the queues no switch marks; without it
    # an incast into a receiving agent that falls behind retired hundreds of EVs on
    # spurious timeouts (docs/protocol.md, "Congestion window").
    cc: str = "nscc"
    cwnd_initial: int = 16
    nscc_target_rtts: float = 1.0  # nscc: high delay is more queueing than this many base RTTs
    nscc_target_min_s: float = 0.0002  # nscc: ... and more than this
    # nscc: queueing delay that quick-adapts the window even without ECN (a queue where
    # no switch marks: the last hop of an incast, or a receiving agent falling behind).
    nscc_qa_delay_s: float = 0.008
    target_delay_s: float = 0.008  # delay: queueing delay the window aims to stay under
    # ECN load migration (hosts/sender.py): an EV with at least ecn_migrate_marks
    # ECN echoes among the acks of its latest ecn_migrate_acks packets is replaced by a
    # fresh EV of its plane on the least used path. 0 marks: never migrate.
    ecn_migrate_marks: int = 2
    ecn_migrate_acks: int = 8
    # [plane, path index] or null: every connection starts with all its active EVs on
    # that one path (for experiments that force flows onto one path); replacements and
    # migrations still use every path of the plane.
    pin_path: tuple[int, int] | None = None
    packet_events: bool = False  # also log "send" and "ack" per packet (slow; debugging)

    def __post_init__(self) -> None:
        if isinstance(self.cc, bool):
            object.__setattr__(self, "cc", "delay" if self.cc else "off")
        self._check_pin_path()
        for f in fields(self):
            value, default = getattr(self, f.name), f.default
            if f.name == "pin_path":
                continue
            if isinstance(default, str):
                ok = isinstance(value, str)
            elif isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool)
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                raise ConfigError(f"protocol.{f.name}: must be {type(default).__name__} "
                                  f"(got {value!r})")
        if self.cc not in CC_KINDS:
            raise ConfigError(f"protocol.cc: must be one of {', '.join(CC_KINDS)} "
                              f"(got {self.cc!r})")
        positive = ("window", "ack_every", "cwnd_initial", "reorder_tolerance")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"protocol.{name}: must be at least 1 "
                                  f"(got {getattr(self, name)!r})")
        if not 1 <= self.mtu_payload <= MAX_PAYLOAD:
            raise ConfigError(f"protocol.mtu_payload: must be 1..{MAX_PAYLOAD} "
                              f"(got {self.mtu_payload!r})")
        for name in ("evs_per_plane", "ev_min_active", "ev_seed"):
            if getattr(self, name) < 0:
                raise ConfigError(f"protocol.{name}: must not be negative "
                                  f"(got {getattr(self, name)!r})")
        if self.evs_per_plane > MAX_EVS_PER_CONNECTION:
            raise ConfigError(f"protocol.evs_per_plane: at most {MAX_EVS_PER_CONNECTION} "
                              f"EVs per connection (got {self.evs_per_plane!r})")
        timers = ("reorder_min_s", "plane_reorder_min_s", "rto_min_s", "rto_initial_s", "rto_max_s",
                  "probe_initial_s", "probe_max_s", "tick_s", "target_delay_s",
                  "nscc_target_min_s", "nscc_qa_delay_s", "reverse_probe_s",
                  "dcqcn_period_s", "cnp_interval_s")
        for name in timers:
            if not getattr(self, name) > 0:
                raise ConfigError(f"protocol.{name}: must be a positive number of seconds "
                                  f"(got {getattr(self, name)!r})")
        if not self.nscc_target_rtts > 0:
            raise ConfigError(f"protocol.nscc_target_rtts: must be a positive number of base "
                              f"RTTs (got {self.nscc_target_rtts!r})")
        for name in ("reconvergence_s", "local_failover_s"):
            if not getattr(self, name) >= 0:  # also refuses NaN
                raise ConfigError(f"protocol.{name}: must not be negative "
                                  f"(got {getattr(self, name)!r})")
        if self.qp_retry_count < -1:
            raise ConfigError(f"protocol.qp_retry_count: must be -1 (never) or more "
                              f"(got {self.qp_retry_count!r})")
        for name in ("dcqcn_g", "dcqcn_ai", "dcqcn_min_rate"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigError(f"protocol.{name}: must be above 0 up to 1 "
                                  f"(got {getattr(self, name)!r})")
        if self.dcqcn_fast_steps < 0:
            raise ConfigError(f"protocol.dcqcn_fast_steps: must not be negative "
                              f"(got {self.dcqcn_fast_steps!r})")
        if self.ecn_migrate_marks < 0:
            raise ConfigError(f"protocol.ecn_migrate_marks: must not be negative "
                              f"(got {self.ecn_migrate_marks!r})")
        if not max(1, self.ecn_migrate_marks) <= self.ecn_migrate_acks <= 64:
            raise ConfigError(f"protocol.ecn_migrate_acks: must be 1..64 and at least "
                              f"ecn_migrate_marks (got {self.ecn_migrate_acks!r})")
        if self.rto_max_s < self.rto_min_s:
            raise ConfigError("protocol.rto_max_s: must not be below rto_min_s")
        if self.probe_max_s < self.probe_initial_s:
            raise ConfigError("protocol.probe_max_s: must not be below probe_initial_s")

    def _check_pin_path(self) -> None:
        """null, or [plane, path index] of two non-negative integers (kept as a tuple).
        Whether the plane exists is checked when a connection starts (the topology is
        not known here)."""
        pin = self.pin_path
        if pin is None:
            return
        if (not isinstance(pin, (list, tuple)) or len(pin) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                           for v in pin)):
            raise ConfigError(f"protocol.pin_path: must be null or [plane, path index], two "
                              f"non-negative integers (got {pin!r})")
        object.__setattr__(self, "pin_path", (pin[0], pin[1]))

    def evs_for(self, paths_per_plane: int, planes: int = 1) -> int:
        """Active EVs per plane for a connection whose planes offer this many paths
        (the setting, or the automatic size); never more than MAX_EVS_PER_CONNECTION
        over all planes, never fewer than one."""
        per_plane = self.evs_per_plane or max(AUTO_MIN_EVS_PER_PLANE,
                                              AUTO_EVS_PER_PATH * max(1, paths_per_plane))
        return max(1, min(per_plane, MAX_EVS_PER_CONNECTION // max(1, planes)))

    @classmethod
    def with_overrides(cls, overrides: dict | None) -> ProtocolConfig:
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(overrides or {}) - set(known))
        if unknown:
            close = difflib.get_close_matches(str(unknown[0]), known, n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ConfigError(f"protocol.{unknown[0]}: unknown setting{hint}")
        return replace(cls(), **(overrides or {}))
