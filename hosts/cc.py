"""Delay-based congestion window, shared by the MRC sender and the single-path baseline.

On the kernel data plane there is no trimming (and often no ECN), so a queue that
overflows drops packets, which MRC would read as broken paths. The window therefore
keeps the queues short: it grows by one packet per round trip while the RTT stays below
the lowest RTT seen plus `target_delay_s`, and shrinks in proportion to the excess
delay (at most once per round trip, never below half) when it does not. NACKs (trimmed
packets) and ECN echoes shrink it the same way.
"""

from __future__ import annotations


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
