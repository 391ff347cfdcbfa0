"""Lab 05, solution: the state of one path, as an MRC sender keeps it.

The same rules as hosts/evset.py, for one path instead of a whole EV set: GOOD, SKIP
(passed over once after an ECN echo or a trimmed packet's NACK), ASSUMED_BAD (retired
after a real loss, probed after doubling waits until a probe is answered).
"""

from __future__ import annotations

from hosts.evset import ASSUMED_BAD, GOOD, SKIP


class PathState:
    def __init__(self, probe_initial_s: float, probe_max_s: float):
        self.state = GOOD
        self.probe_initial_s = probe_initial_s
        self.probe_max_s = probe_max_s
        self.probe_at: float | None = None  # when the next probe is due (ASSUMED_BAD only)
        self.wait = probe_initial_s  # the wait before the next probe after that one

    def take_turn(self) -> bool:
        """The sender's rotation reached this path: may a data packet go on it now?"""
        if self.state == SKIP:
            self.state = GOOD  # skipped this once: the next turn sends again
            return False
        return self.state == GOOD

    def on_congestion(self, now: float) -> None:
        """An ECN echo, or a NACK for a packet trimmed on this path."""
        # Congestion says "busy", not "broken": retiring here would throw away a
        # working path whenever a queue fills.
        if self.state == GOOD:
            self.state = SKIP

    def on_loss(self, now: float) -> None:
        """A packet sent on this path was lost (a gap, a timeout, or late in its plane)."""
        if self.state == ASSUMED_BAD:
            return  # packets in flight when it broke: already known
        self.state = ASSUMED_BAD
        self.wait = self.probe_initial_s
        self.probe_at = now + self.wait

    def probe_due(self, now: float) -> bool:
        """Asked on every timer tick: send a probe now? Returning True means one is sent."""
        if self.state != ASSUMED_BAD or self.probe_at is None or now < self.probe_at:
            return False
        # Doubling keeps a long outage from costing a probe every few milliseconds,
        # the cap bounds how long a healed path waits to be noticed.
        self.wait = min(self.wait * 2, self.probe_max_s)
        self.probe_at = now + self.wait
        return True

    def on_probe_reply(self, now: float) -> None:
        """A probe sent on this path came back."""
        if self.state != ASSUMED_BAD:
            return
        self.state = GOOD
        self.probe_at = None
        self.wait = self.probe_initial_s


__all__ = ["ASSUMED_BAD", "GOOD", "SKIP", "PathState"]
