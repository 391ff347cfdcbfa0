"""Protocol settings of the host agents, with defaults that fit the emulated links.

Scenario files may override any of them (`protocol:`); unknown names and values out of
range are a `ConfigError` naming the setting ("protocol.window: ..."). Where the OCP
MRC API (mrc.h, mrc_ctl.h) has the concept, a setting carries its name (`ev_count`,
`ev_min_active`, `retry_linear_cnt` and `retry_exp_cnt` for `retry.linear_cnt` and
`retry.exp_cnt`), and a scenario may give the QP's local ACK `timeout` exponent in
place of `rto_min_s` (docs/protocol.md "Settings" maps each one).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields, replace

from hosts.protocol import DEFAULT_MTU_PAYLOAD, MAX_PAYLOAD

# EV sets (docs/protocol.md "Connections and EVs"). The paper's NICs draw 128-256 EVs per
# connection (OCP MRC's `ev_count`), split equally over the planes: 16-32 per plane of up
# to 256 paths, each plane's a random subset of its paths. The emulated planes have
# 2-16 paths and carry a few packets per round trip, where 16-32 EVs per plane would
# repeat each path many times over and slow the per-EV loss detection (a loss shows when
# later packets on the same EV are acknowledged). So with ev_count = 0 each plane gets
# AUTO_EVS_PER_PLANE EVs: two or more per path on planes of up to four paths (enough
# that retiring one path never runs into the ev_min_active floor, and fine-grained
# enough that migrating one EV moves an eighth of the plane's share), and a random
# subset of at most half the paths on planes of 16, as in the paper. A connection has at
# most MAX_EV_COUNT EVs (the paper's largest set). Each plane also draws as many backup
# EVs, from which a retired EV is replaced (hosts/evset.py).
AUTO_EVS_PER_PLANE = 8
MAX_EV_COUNT = 256

# What a same-rack pair may use (rack_local_paths): the direct path through its T0
# only; spine detours while the direct path of a plane is bad; or every path.
RACK_LOCAL_PATHS = ("direct", "fallback", "all")

# OCP MRC's local ACK timeout (`mrc_qp_attr.timeout`): 1.024 us x 2^timeout, timeout
# 0..24. A scenario may give it instead of rto_min_s (with_overrides).
ACK_TIMEOUT_UNIT_S = 1.024e-6
ACK_TIMEOUT_MAX = 24
# OCP MRC's exponential retry count (`mrc_qp_attr.retry.exp_cnt`) that means "forever".
RETRY_EXP_INFINITE = 25

# Settings renamed: a scenario that still names one gets the new name in the error.
RENAMED = {"evs_per_plane": "ev_count (the EVs of a connection over all its planes, "
                            "OCP MRC's name: planes x the old value)"}

# The default interval of reverse-EV probes; on slow links the agent makes it longer
# (hosts/endpoint.py `link_adjusted`), a scenario's own value it keeps.
REVERSE_PROBE_S = 0.05

# A SACK held for company delays every RTT sample and loss check it carries by as long.
MAX_ACK_DELAY_RTTS = 1.0
CC_KINDS = ("nscc", "delay", "off")  # the congestion windows of hosts/cc.py


class ConfigError(ValueError):
    """A protocol setting with an unknown name or a value out of range."""


@dataclass(frozen=True)
class ProtocolConfig:
    mtu_payload: int = DEFAULT_MTU_PAYLOAD  # payload bytes per DATA packet
    window: int = 64  # packets in flight per connection (the congestion window's cap)
    # EVs per connection (OCP MRC's ev_count), split equally over the planes (rounded
    # down to a multiple of the plane count, at least one per plane); 0: automatic,
    # AUTO_EVS_PER_PLANE per plane. At most MAX_EV_COUNT.
    ev_count: int = 0
    ev_seed: int = 0  # EV sets are drawn from this seed and the connection's identity
    # Never retire below this many usable active EVs (OCP MRC's ev_min_active; at most
    # ev_count when that is set).
    ev_min_active: int = 2
    # Same-rack pairs: "direct" (only the path through their T0, never up to a T1, as
    # the paper keeps T0-local traffic), "fallback" (spine detours too, while the direct
    # path of a plane is bad) or "all" (the direct path and every detour alike).
    rack_local_paths: str = "direct"
    reorder_tolerance: int = 3  # later packets acked on the same EV before one counts lost
    reorder_min_s: float = 0.002  # floor of the cross-path reordering window (one srtt)
    # How much later than a packet one of its plane must have been sent, and acked, to
    # show it late; its path's srtt + 4 rttvar decides when it counts as late.
    plane_reorder_min_s: float = 0.0001
    # How much longer than a sibling of its plane a healthy path may take: the queues
    # where the paths of a plane differ (the T0 uplink and the T1 downlink) filled to
    # where switches trim, or to their capacity for data no switch trims
    # (hosts/endpoint.py `link_adjusted` sets it from the fabric). A path held because
    # a packet of it was late is retired if its probe finds no answer within the path's
    # srtt + max(4 rttvar, this) (hosts/sender.py `_late`).
    path_skew_s: float = 0.0
    # RTT samples a path needs before its own srtt + 4 rttvar judges its packets late
    # within the plane: one sample of a still empty network says little about the
    # queues that build as every connection starts (docs/protocol.md "First timeouts").
    rtt_min_samples: int = 4
    # Retransmission timeout floor; a scenario may give OCP MRC's `timeout` exponent
    # instead (with_overrides).
    rto_min_s: float = 0.05
    # The timeout of a first transmission on a path with no RTT sample of its own (the
    # agent raises it to the fabric's worst round trip, hosts/endpoint.py
    # `link_adjusted`; RFC 6298's initial RTO is 1 s for the same reason).
    rto_initial_s: float = 0.25
    rto_max_s: float = 1.0
    # OCP MRC's retry counts (mrc_qp_attr.retry): timeouts of one packet at the same
    # timeout before it starts doubling (linear_cnt, at most 7), then doublings
    # (exp_cnt, at most 25, which means forever) before the connection gives up.
    retry_linear_cnt: int = 0
    retry_exp_cnt: int = RETRY_EXP_INFINITE
    # First probe of a retired path, then doubling while probes go unanswered, up to
    # probe_max_s (a healed path waits at most that long for its next probe).
    probe_initial_s: float = 0.05
    probe_max_s: float = 0.8
    # A retired path returns after this many probe replies in a row, each on time and
    # unmarked, at least probe_spacing_s apart (docs/protocol.md "Probes and
    # reinstatement"): probe_successes (8) if its first probe failed and none has since
    # its first success (the failures before it were the outage: a healed path, back
    # 70 ms after it answers), probe_successes_lossy (66; never fewer than
    # probe_successes) if one has, or if its first probe was answered at once (the path
    # loses packets while it answers). 66 in a row: a path losing 10% passes 0.1% of
    # its tries, the paper's Fig. 13 path losing 20% 4e-7 (it stays out), one losing 1%
    # 51%. A lossy path looks healed only when its first probe is lost and none after
    # its first success: 0.2 x 0.8^7 = 4% of its retirements at 20% loss (then it loses
    # a data packet at once and is retired again: 0.045 reinstatements in 100 s on
    # average, all early). 10 ms is about three round trips of the emulated fabric.
    probe_successes: int = 8
    probe_successes_lossy: int = 66
    probe_spacing_s: float = 0.01
    probes: bool = True  # mrc-no-probe turns them off: retired EVs stay retired
    # EV probes of the reverse set (hosts/reverse.py), per plane and peer: a receiver of
    # seven peers on eight planes sends over a thousand a second at 50 ms; at 5 ms its
    # probes and their replies filled a 2.5 Mbit/s host link and its agent's CPU.
    reverse_probe_s: float = REVERSE_PROBE_S
    tick_s: float = 0.002  # timer granularity of the event loop
    ack_every: int = 8  # in-order data packets one SACK may answer
    # How long a plain SACK may wait for others of its connection, in base round trips
    # of the fabric (0: to the end of the receive batch only). Not held by default: a
    # quarter of a round trip doubles the budget (docs/similarity.md) but delays the
    # window's and ECN migration's news by as much, which tests of both show.
    ack_delay_rtts: float = 0.0
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
    # migrations still use every path of the plane. [plane, null]: all its EVs on that
    # plane, spread over its paths as usual (a reference on the same plane).
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
        positive = ("window", "ack_every", "cwnd_initial", "reorder_tolerance",
                    "probe_successes", "probe_successes_lossy", "rtt_min_samples")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"protocol.{name}: must be at least 1 "
                                  f"(got {getattr(self, name)!r})")
        if not 1 <= self.mtu_payload <= MAX_PAYLOAD:
            raise ConfigError(f"protocol.mtu_payload: must be 1..{MAX_PAYLOAD} "
                              f"(got {self.mtu_payload!r})")
        for name in ("ev_count", "ev_min_active", "ev_seed", "retry_linear_cnt"):
            if getattr(self, name) < 0:
                raise ConfigError(f"protocol.{name}: must not be negative "
                                  f"(got {getattr(self, name)!r})")
        if self.ev_count > MAX_EV_COUNT:
            raise ConfigError(f"protocol.ev_count: at most {MAX_EV_COUNT} EVs per "
                              f"connection (got {self.ev_count!r})")
        if self.ev_count and self.ev_min_active > self.ev_count:
            raise ConfigError(f"protocol.ev_min_active: must not be above ev_count "
                              f"({self.ev_count}) (got {self.ev_min_active!r})")
        if self.rack_local_paths not in RACK_LOCAL_PATHS:
            raise ConfigError(f"protocol.rack_local_paths: must be one of "
                              f"{', '.join(RACK_LOCAL_PATHS)} (got {self.rack_local_paths!r})")
        if self.retry_linear_cnt > 7:
            raise ConfigError(f"protocol.retry_linear_cnt: at most 7, as in OCP MRC "
                              f"(got {self.retry_linear_cnt!r})")
        if not 0 <= self.retry_exp_cnt <= RETRY_EXP_INFINITE:
            raise ConfigError(f"protocol.retry_exp_cnt: must be 0..{RETRY_EXP_INFINITE} "
                              f"({RETRY_EXP_INFINITE}: forever) (got {self.retry_exp_cnt!r})")
        timers = ("reorder_min_s", "plane_reorder_min_s", "rto_min_s", "rto_initial_s", "rto_max_s",
                  "probe_initial_s", "probe_max_s", "probe_spacing_s", "tick_s",
                  "target_delay_s",
                  "nscc_target_min_s", "nscc_qa_delay_s", "reverse_probe_s",
                  "dcqcn_period_s", "cnp_interval_s")
        for name in timers:
            if not getattr(self, name) > 0:
                raise ConfigError(f"protocol.{name}: must be a positive number of seconds "
                                  f"(got {getattr(self, name)!r})")
        if not 0 <= self.path_skew_s < float("inf"):
            raise ConfigError(f"protocol.path_skew_s: must be 0 or a positive number of "
                              f"seconds (got {self.path_skew_s!r})")
        if not self.nscc_target_rtts > 0:
            raise ConfigError(f"protocol.nscc_target_rtts: must be a positive number of base "
                              f"RTTs (got {self.nscc_target_rtts!r})")
        for name in ("reconvergence_s", "local_failover_s"):
            if not getattr(self, name) >= 0:  # also refuses NaN
                raise ConfigError(f"protocol.{name}: must not be negative "
                                  f"(got {getattr(self, name)!r})")
        if not 0 <= self.ack_delay_rtts <= MAX_ACK_DELAY_RTTS:
            raise ConfigError(f"protocol.ack_delay_rtts: must be 0 to {MAX_ACK_DELAY_RTTS} base "
                              f"round trips (got {self.ack_delay_rtts!r}): a SACK held longer "
                              "slows loss detection by as much")
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
        """null, or [plane, path index] of two non-negative integers, the path index
        possibly null (kept as a tuple). Whether the plane exists is checked when a
        connection starts (the topology is not known here)."""
        pin = self.pin_path
        if pin is None:
            return

        def index(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 0

        if (not isinstance(pin, (list, tuple)) or len(pin) != 2 or not index(pin[0])
                or not (pin[1] is None or index(pin[1]))):
            raise ConfigError(f"protocol.pin_path: must be null, [plane, path index] of two "
                              f"non-negative integers, or [plane, null] (got {pin!r})")
        object.__setattr__(self, "pin_path", (pin[0], pin[1]))

    def evs_for(self, planes: int) -> int:
        """Active EVs per plane for a connection over this many planes: ev_count (or
        the automatic size) split equally, at least one per plane."""
        planes = max(1, planes)
        total = self.ev_count or AUTO_EVS_PER_PLANE * planes
        return max(1, min(total, MAX_EV_COUNT) // planes)

    def ack_timeout(self) -> int:
        """rto_min_s as OCP MRC's `timeout` exponent (1.024 us x 2^timeout), rounded up."""
        t = 0
        while t < ACK_TIMEOUT_MAX and ACK_TIMEOUT_UNIT_S * 2 ** t < self.rto_min_s:
            t += 1
        return t

    @classmethod
    def with_overrides(cls, overrides: dict | None) -> ProtocolConfig:
        """The defaults with a scenario's `protocol:` settings. Besides the settings'
        own names it takes OCP MRC's local ACK timeout, `timeout` (an exponent t:
        rto_min_s = 1.024 us x 2^t, rto_max_s raised to it if lower), in place of
        rto_min_s."""
        overrides = dict(overrides or {})
        if "timeout" in overrides:
            t = overrides.pop("timeout")
            if "rto_min_s" in overrides:
                raise ConfigError("protocol.timeout: give either timeout (OCP MRC's "
                                  "exponent) or rto_min_s, not both")
            if not (isinstance(t, int) and not isinstance(t, bool)
                    and 0 <= t <= ACK_TIMEOUT_MAX):
                raise ConfigError(f"protocol.timeout: must be an integer 0..{ACK_TIMEOUT_MAX} "
                                  f"(1.024 us x 2^timeout) (got {t!r})")
            overrides["rto_min_s"] = ACK_TIMEOUT_UNIT_S * 2 ** t
            if "rto_max_s" not in overrides:
                overrides["rto_max_s"] = max(cls.rto_max_s, overrides["rto_min_s"])
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            if unknown[0] in RENAMED:
                raise ConfigError(f"protocol.{unknown[0]}: renamed; use {RENAMED[unknown[0]]}")
            close = difflib.get_close_matches(str(unknown[0]), known, n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ConfigError(f"protocol.{unknown[0]}: unknown setting{hint}")
        return replace(cls(), **overrides)
