"""Per-plane pacing: a host sends on each plane a little under that port's link rate.

Each plane keeps the time its link is busy until (`next_free`). A packet may leave when
that time is at most `burst_s` ahead of now (two full packets, or a millisecond on a
fast link), so the link never idles for lack of a queued packet, yet the host's own
queue never overflows and no plane gets a burst that would build a standing queue
downstream.

Senders charge every packet as they produce it (`charge`), so one poll of a sender
that may send many packets spreads them over the planes that are ready instead of
piling them onto whichever plane was ready when the poll began.
"""

from __future__ import annotations

from hosts.protocol import WIRE_OVERHEAD, link_pps

PACE_FRACTION = 0.97  # a little under the line rate, so rounding never builds a queue
BURST_PACKETS = 2
# A busy host's event loop may wake a fraction of a millisecond late: a plane may run
# this far ahead, or a fast link would idle each time the loop slept (two packets take
# a tenth of a millisecond at 100 Mbit/s).
MIN_BURST_S = 0.001


class Pacer:
    __slots__ = ("enabled", "byte_s", "burst_s", "packet_s", "next_free", "now",
                 "horizon")

    def __init__(self, planes: int, rate_mbit: float, packet_bytes: int, enabled: bool = True):
        self.enabled = enabled
        self.next_free = [0.0] * planes
        self.now = 0.0
        self.horizon = 0.0
        self.set_rate(rate_mbit, packet_bytes)

    def set_rate(self, rate_mbit: float, packet_bytes: int) -> None:
        """Pace to `rate_mbit` a plane from now on (a NIC port that came up at a lower
        speed, as a lane down leaves it)."""
        # Seconds the paced link is busy per byte of a frame (the time of a 1-byte frame),
        # so charging a packet is one multiplication.
        self.byte_s = 1 / link_pps(rate_mbit * PACE_FRACTION, 1)
        self.packet_s = (packet_bytes + WIRE_OVERHEAD) * self.byte_s
        self.burst_s = max(MIN_BURST_S, BURST_PACKETS * self.packet_s)

    def at(self, now: float) -> None:
        """Set the clock for the ready()/charge() calls that follow."""
        self.now = now
        self.horizon = now + self.burst_s

    def ready(self, plane: int) -> bool:
        return not self.enabled or self.next_free[plane] <= self.horizon

    def ready_resend(self, plane: int) -> bool:
        """Whether a retransmission may leave on `plane`: one full packet beyond what
        ready() allows. A lost packet holds up its whole message, so it should not wait
        behind new data for the plane's next slot; being charged like any packet, it
        delays the new data after it instead, and the rate stays the same."""
        return not self.enabled or self.next_free[plane] <= self.horizon + self.packet_s

    def charge(self, plane: int, size: int) -> None:
        """A datagram of `size` bytes (MRC header and body) leaves on `plane` now."""
        if self.enabled:
            start = self.next_free[plane]
            if start < self.now:
                start = self.now
            self.next_free[plane] = start + (size + WIRE_OVERHEAD) * self.byte_s

    def full(self) -> bool:
        """No plane may take even a retransmission now (ready_resend() is false for
        every plane)."""
        return self.enabled and min(self.next_free) > self.horizon + self.packet_s

    def ready_at(self, planes: list[int], resend: bool = False) -> float:
        """When the first of `planes` may send again (a retransmission, with resend)."""
        if not self.enabled:
            return self.now
        ahead = self.burst_s + (self.packet_s if resend else 0.0)
        return min(self.next_free[p] for p in planes) - ahead
