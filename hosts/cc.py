"""Congestion windows of the MRC sender: NSCC-style (the default) and a delay window.

Both are windows of packets in flight below the connection's `window` cap, fed by the
sender with one call per acknowledged packet (`on_ack`: its RTT sample, if the packet
was sent once, and whether the SACK echoed ECN), one per NACK (`on_nack`: the packet
was trimmed) and one per loss (`on_loss`). `make_window(config)` builds the one that
`protocol.cc` names.

`Nscc` follows the shape of Ultra Ethernet's NSCC, which MRC's NICs run: ECN leads and
delay lags. ECN says a queue on this packet's path is building now; the RTT says how
much queueing the packet met. The queueing delay is the RTT less the lowest RTT seen
(the base RTT), and it is high above a target taken from the base RTT
(`nscc_target_rtts` base RTTs, at least `nscc_target_min_s`). Per acknowledged packet:

- ECN and high delay: a queue is really there: cut the window in proportion to the
  excess delay (at most once per round trip, never below half);
- ECN, delay not high: the queue is only starting (or the mark is from a brief burst);
  hold, since the next round trip's delay will show whether it lasts;
- high delay, no ECN: the delay comes from elsewhere (jitter, the receiver's host, a
  queue that is draining): grow by one packet per round trip, the fair increase that
  lets competing connections converge;
- neither: the path has room: grow in proportion to the headroom below the target, up
  to half the window per round trip, plus the fair increase.

Quick adapt: after a loss or a trimmed packet, the window drops at once to what was
actually acknowledged in the last round trip (at most once per round trip), instead of
shrinking step by step while the queue overflows. It also fires when a packet's
queueing delay passes `nscc_qa_delay_s`, ECN or not: such a queue sits where no switch
marks, on the port facing the receiver (an incast; switches never mark there) or in
the receiving host itself (a software agent that falls behind). Without this ceiling
the "high delay, no ECN" case grows the window by one packet per round trip for as
long as the incast lasts, and the queue grows past the retransmission timeout.

`DelayWindow` (`cc: delay`) is the simpler window the testbed began with: it grows by
one packet per round trip while the RTT stays below the base RTT plus `target_delay_s`
and shrinks in proportion to the excess delay otherwise; NACKs and ECN echoes shrink it
by a fifth, once per round trip; losses leave it alone. `cc: off` keeps only the cap.
"""

from __future__ import annotations

from typing import Protocol

from hosts.config import ProtocolConfig

# NSCC gains: the proportional increase per acknowledged packet at full headroom (0.5:
# the window grows by half per round trip on an empty path), and the multiplicative
# decrease per unit of excess delay (relative to the RTT).
NSCC_PROPORTIONAL_GAIN = 0.5
NSCC_DECREASE_GAIN = 0.8
NSCC_MIN_FACTOR = 0.5  # never cut more than half in one round trip
_INF = float("inf")


class Window(Protocol):
    cwnd: float

    def allows(self, inflight: int) -> bool: ...
    def on_ack(self, rtt: float | None, ecn: bool, now: float) -> None: ...
    def on_nack(self, now: float) -> None: ...
    def on_loss(self, now: float) -> None: ...


class DelayWindow:
    __slots__ = ("cwnd", "limit", "target", "base_rtt", "last_cut", "enabled")

    def __init__(self, initial: float, limit: int, target_delay_s: float, enabled: bool = True):
        self.cwnd = float(min(initial, limit))
        self.limit = limit
        self.target = target_delay_s
        self.base_rtt = float("inf")
        self.last_cut = 0.0
        self.enabled = enabled

    def allows(self, inflight: int) -> bool:
        return inflight < (self.cwnd if self.enabled else self.limit)

    def on_ack(self, rtt: float | None, ecn: bool, now: float) -> None:
        if ecn:
            self.on_congestion(now)
        if rtt is not None:
            self.on_rtt(rtt, now)

    def on_nack(self, now: float) -> None:
        self.on_congestion(now)

    def on_loss(self, now: float) -> None:
        pass  # a loss is a failed path to MRC, not congestion

    def on_rtt(self, rtt: float, now: float) -> None:
        if rtt <= 0:
            return
        self.base_rtt = min(self.base_rtt, rtt)
        excess = rtt - (self.base_rtt + self.target)
        if excess <= 0:
            self.cwnd = min(self.limit, self.cwnd + 1.0 / self.cwnd)
        elif now - self.last_cut > rtt:
            self.cut(max(0.5, 1.0 - 0.8 * excess / rtt), now)

    def cut(self, factor: float, now: float) -> None:
        self.cwnd = max(1.0, self.cwnd * factor)
        self.last_cut = now

    def on_congestion(self, now: float) -> None:
        """A NACK or an ECN echo: back off once per round trip."""
        rtt = self.base_rtt if self.base_rtt != float("inf") else 0.0
        if now - self.last_cut > rtt:
            self.cut(0.8, now)


class Nscc:
    """The NSCC-style window (see the module docstring for the four cases)."""

    __slots__ = ("cwnd", "limit", "target_rtts", "target_min", "base_rtt", "last_cut",
                 "epoch_start", "epoch_acked", "last_epoch_acked", "last_adapt", "enabled",
                 "last_case", "qa_delay")

    def __init__(self, initial: float, limit: int, target_rtts: float, target_min_s: float,
                 enabled: bool = True, qa_delay_s: float = float("inf")):
        self.cwnd = float(min(initial, limit))
        self.limit = limit
        self.target_rtts = target_rtts
        self.target_min = target_min_s
        self.base_rtt = float("inf")
        self.last_cut = float("-inf")
        # Packets acknowledged in the current and the last epoch of one round trip:
        # what the network really delivered, for quick adapt.
        self.epoch_start = 0.0
        self.epoch_acked = 0
        self.last_epoch_acked = 0
        self.last_adapt = float("-inf")
        self.enabled = enabled
        self.last_case = ""  # which case the last ack fell in (for tests and logs)
        self.qa_delay = qa_delay_s  # queueing delay that quick-adapts, ECN or not

    def allows(self, inflight: int) -> bool:
        return inflight < (self.cwnd if self.enabled else self.limit)

    @property
    def target(self) -> float:
        """The queueing delay above which delay counts as high."""
        if self.base_rtt == float("inf"):
            return self.target_min
        return max(self.target_min, self.target_rtts * self.base_rtt)

    def _round_trip(self) -> float:
        """A round trip at the target: the epoch of quick adapt and of one decrease."""
        return 0.0 if self.base_rtt == float("inf") else self.base_rtt + self.target

    def _count(self, now: float) -> None:
        if now - self.epoch_start >= self._round_trip():
            self.last_epoch_acked, self.epoch_acked = self.epoch_acked, 0
            self.epoch_start = now
        self.epoch_acked += 1

    def on_ack(self, rtt: float | None, ecn: bool, now: float) -> None:
        # _count, `target` and _round_trip inlined: this runs for every acked packet.
        base = self.base_rtt
        if now - self.epoch_start >= (0.0 if base == _INF else base + max(
                self.target_min, self.target_rtts * base)):
            self.last_epoch_acked, self.epoch_acked = self.epoch_acked, 0
            self.epoch_start = now
        self.epoch_acked += 1
        delay = None
        if rtt is not None and rtt > 0:
            if rtt < base:
                self.base_rtt = base = rtt
            delay = rtt - base
        target = (self.target_min if base == _INF
                  else max(self.target_min, self.target_rtts * base))
        # Without a fresh sample (a retransmission's ack) the delay is unknown: an ECN
        # echo alone holds, and nothing grows on a guess.
        high = delay is not None and delay > target
        if high and delay > max(self.qa_delay, target):
            # A queue no switch marks (the last hop, the receiving host): see the module
            # docstring.
            self.last_case = "delay-quick-adapt"
            self.quick_adapt(now)
        elif ecn and high:
            self.last_case = "decrease"
            if now - self.last_cut > self._round_trip():
                factor = max(NSCC_MIN_FACTOR, 1.0 - NSCC_DECREASE_GAIN * (delay - target) / rtt)
                self.cwnd = max(1.0, self.cwnd * factor)
                self.last_cut = now
        elif ecn:
            self.last_case = "hold"
        elif delay is None:
            self.last_case = "no-sample"
        elif high:
            self.last_case = "fair-increase"
            self.cwnd = min(self.limit, self.cwnd + 1.0 / self.cwnd)
        else:
            self.last_case = "proportional-increase"
            headroom = (target - delay) / target
            self.cwnd = min(self.limit, self.cwnd + NSCC_PROPORTIONAL_GAIN * headroom
                            + 1.0 / self.cwnd)

    def on_nack(self, now: float) -> None:
        self.quick_adapt(now)

    def on_loss(self, now: float) -> None:
        self.quick_adapt(now)

    def quick_adapt(self, now: float) -> None:
        """Drop the window to what was acknowledged in the last round trip."""
        rtt = self._round_trip()
        if not rtt or now - self.last_adapt < rtt:
            return
        achieved = max(self.epoch_acked, self.last_epoch_acked)
        self.cwnd = max(1.0, min(self.cwnd, float(achieved)))
        self.last_adapt = self.last_cut = now


def make_window(config: ProtocolConfig) -> DelayWindow | Nscc:
    """The window `config.cc` names; `off` is an NSCC window that never limits."""
    if config.cc == "delay":
        return DelayWindow(config.cwnd_initial, config.window, config.target_delay_s)
    return Nscc(config.cwnd_initial, config.window, config.nscc_target_rtts,
                config.nscc_target_min_s, enabled=config.cc != "off",
                qa_delay_s=config.nscc_qa_delay_s)
