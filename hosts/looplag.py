"""How far behind an agent's event loop runs: late timers and long turns, as percentiles.

An agent that falls behind (too many agents for the machine's cores, a turn that made or
checked a large message) makes the network look slow: its acks leave late, its timers
fire late, and its peers take the delay for queueing or a broken path. Each agent
therefore measures its own loop over the whole run (hosts/agent.py):

- `lag_ms`: how late its timers fire: every time the loop slept until a deadline (a
  protocol timer, pacing, the progress tick) and woke at or after it, the time past the
  deadline (the machine's scheduling delay); and every progress tick (a fixed period,
  `progress_s`), the time between its due time and the moment the loop ran it, which
  also counts the loop's own work that held it up;
- `turn_ms`: how long each turn of the loop took beyond its wait: from the moment it
  stopped waiting to the moment it waited again (what a packet arriving during a turn
  waits at most before the loop looks at its socket).

Samples go into a histogram of logarithmic buckets (`BUCKETS_PER_DOUBLING` per doubling
of the value, so each percentile is exact within about 9%), whatever the run's length:
one float comparison and a list increment per sample; the maximum is exact.
"""

from __future__ import annotations

import math

BUCKETS_PER_DOUBLING = 8
# The smallest value told apart (a microsecond); anything below falls in bucket 0.
FLOOR_S = 1e-6
_BUCKETS = 40 * BUCKETS_PER_DOUBLING  # up to 2^40 us: days


class LagHistogram:
    """Samples in seconds; `summary()` in milliseconds."""

    __slots__ = ("counts", "count", "max")

    def __init__(self):
        self.counts = [0] * (_BUCKETS + 1)
        self.count = 0
        self.max = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        if seconds > self.max:
            self.max = seconds
        if seconds <= FLOOR_S:
            self.counts[0] += 1
            return
        index = int(math.log2(seconds / FLOOR_S) * BUCKETS_PER_DOUBLING) + 1
        self.counts[min(index, _BUCKETS)] += 1

    def percentile(self, q: float) -> float:
        """The q-th percentile (0-100) in seconds: the upper edge of its bucket, never
        above the largest sample; 0 without samples."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                edge = FLOOR_S * 2 ** (index / BUCKETS_PER_DOUBLING) if index else FLOOR_S
                return min(edge, self.max)
        return self.max

    def summary(self) -> dict:
        """{"p50", "p99", "max"} in ms (3 decimals) and the number of samples."""
        return {"p50": round(1000 * self.percentile(50), 3),
                "p99": round(1000 * self.percentile(99), 3),
                "max": round(1000 * self.max, 3), "samples": self.count}


class LoopLag:
    """The two figures of the module docstring, fed by the agent's loop."""

    __slots__ = ("lag", "turn")

    def __init__(self):
        self.lag = LagHistogram()
        self.turn = LagHistogram()

    def summary(self) -> dict:
        return {"lag_ms": self.lag.summary(), "turn_ms": self.turn.summary()}
