"""Lab 05: the state of one path, as an MRC sender keeps it. Complete the five TODOs.

A sender sprays packets over many paths. For each it remembers one of:
  GOOD         in use;
  SKIP         passed over once: the path is busy (an ECN echo, or a NACK saying a
               packet sent on it was trimmed), not broken;
  ASSUMED_BAD  retired after a real loss; it gets no data, only probes, sent after
               waits that double (probe_initial_s, then twice that, ... at most
               probe_max_s), until one is answered and the path is GOOD again.
The check drives your class with scripted events, then replays what the project's
own sender did on the simulated network while a T1 spine was down for 130 ms.
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
        # TODO 1: GOOD sends; SKIP is passed over this once and becomes GOOD again;
        # ASSUMED_BAD never carries data.
        raise NotImplementedError("TODO 1: take_turn")

    def on_congestion(self, now: float) -> None:
        """An ECN echo, or a NACK for a packet trimmed on this path."""
        # TODO 2: a busy path is skipped, not retired (and a retired one stays retired).
        raise NotImplementedError("TODO 2: on_congestion")

    def on_loss(self, now: float) -> None:
        """A packet sent on this path was lost (a gap, a timeout, or late in its plane)."""
        # TODO 3: retire the path and schedule its first probe probe_initial_s from now.
        # A retired path that loses more packets keeps the schedule it has.
        raise NotImplementedError("TODO 3: on_loss")

    def probe_due(self, now: float) -> bool:
        """Asked on every timer tick: send a probe now? Returning True means one is sent."""
        # TODO 4: only a retired path is probed, and only once its time has come; then
        # the next probe waits twice as long as this one did, at most probe_max_s.
        # Returning False changes nothing.
        raise NotImplementedError("TODO 4: probe_due")

    def on_probe_reply(self, now: float) -> None:
        """A probe sent on this path came back."""
        # TODO 5: a retired path is GOOD again; its next retirement starts the probe
        # waits afresh. A reply for a path that is not retired changes nothing.
        raise NotImplementedError("TODO 5: on_probe_reply")


__all__ = ["ASSUMED_BAD", "GOOD", "SKIP", "PathState"]
