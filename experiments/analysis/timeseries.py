"""Time series of a run at a chosen granularity (pure): throughput in whole windows,
means over spans of them, and what each path of a connection carried, or held, over time.

The MRC paper shows its fault experiments as bandwidth against time, reported every 200
ms, and its EV experiments as each EV's activity against time (its Fig. 9-14). These
helpers cut a run's records into windows of a given length counted from the run's start,
so that two passes (one under faults, one without) compare window by window:

- `throughput`: Mbit/s of the given flows (all of them by default) in each whole window
  up to a time, from the agents' progress samples (experiments/analysis/metrics.py
  `flow_curves`: bytes between two samples are spread evenly over the time between
  them); a window no sample of a destination covers is None;
- `Window`: one window's throughput wherever it starts, for a judge that slides a
  window along a span (a return read to a round trip, not to a window);
- `span_mean`: the mean of the windows lying wholly within a span (None if one is
  missing, or there is none);
- `sends_by_path`: the DATA packets one connection sent on each of its paths in each
  window (per-packet `send` events, protocol setting `packet_events`);
- `paths_held`: how many of one connection's EVs sit on each path over time, from the
  EVs it started with and its ECN migrations (`migrate` events).

Times are seconds since the run's start unless a name says otherwise; two that differ
by less than EPS_S are the same time (timelines are written to a tenth of a millisecond).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable

from experiments.analysis.metrics import flow_curves, flow_mbps

EPS_S = 1e-4
Flow = tuple[int, int]
Series = list[tuple[float, float | None]]  # (window start, value)


def window_starts(window_s: float, t0: float, t1: float) -> list[float]:
    """The starts of the windows of `window_s` (counted from 0) lying wholly within
    [t0, t1)."""
    first = math.ceil((t0 - EPS_S) / window_s)
    last = math.floor((t1 + EPS_S) / window_s)
    return [i * window_s for i in range(first, last)]


def throughput(events: list[dict], start: float, window_s: float, until: float,
               flows: Iterable[Flow] | None = None) -> Series:
    """(window start, Mbit/s summed over `flows`) for every whole window from 0 to
    `until`; `start` is the run's start on the events' clock. Flows that carried nothing
    count 0; a window some destination reported nothing around is None."""
    return Window(events, start, window_s, flows).series(until)


class Window:
    """One window's throughput of `flows` (all of them by default) wherever it starts:
    `mbps(a)` for the window [a, a + window_s), `a` in seconds since the run's `start`
    (on the events' clock). Flows that carried nothing count 0; None if some
    destination reported nothing around the window."""

    def __init__(self, events: list[dict], start: float, window_s: float,
                 flows: Iterable[Flow] | None = None):
        self.events, self.start, self.window_s = events, start, window_s
        self.curves = flow_curves(events)
        self.flows = sorted(self.curves[0]) if flows is None else [tuple(f) for f in flows]

    def mbps(self, a: float) -> float | None:
        t0 = self.start + a
        values = [flow_mbps(self.events, src, dst, t0, t0 + self.window_s, self.curves)
                  for src, dst in self.flows]
        return None if not values or any(v is None for v in values) else sum(values)

    def series(self, until: float) -> Series:
        """(window start, Mbit/s) for every whole window from 0 to `until`."""
        return [(a, self.mbps(a)) for a in window_starts(self.window_s, 0.0, until)]


def span_mean(series: Series, window_s: float, t0: float, t1: float) -> float | None:
    """The mean of the windows of `series` lying wholly within [t0, t1)."""
    inside = [v for a, v in series if a >= t0 - EPS_S and a + window_s <= t1 + EPS_S]
    if not inside or any(v is None for v in inside):
        return None
    return statistics.fmean(inside)


def ratio(value: float | None, against: float | None) -> float | None:
    return None if value is None or not against else value / against


def sends_by_path(events: list[dict], host: int, peer: int, path_of: Callable[[int], object],
                  start: float, window_s: float, until: float) -> dict[object, list[int]]:
    """DATA packets (first transmissions and retransmissions) `host` sent to `peer` on
    each path (`path_of(ev)`) in each whole window from 0 to `until`."""
    count = len(window_starts(window_s, 0.0, until))
    out: dict[object, list[int]] = {}
    for e in events:
        if e.get("event") != "send" or e.get("host") != host or e.get("peer") != peer:
            continue
        i = int((e["t"] - start) / window_s)
        if 0 <= i < count:
            out.setdefault(path_of(e["ev"]), [0] * count)[i] += 1
    return out


def paths_held(events: list[dict], host: int, peer: int, initial: dict[int, int],
               start: float) -> list[tuple[float, dict[int, int]]]:
    """How many of the connection `host` -> `peer`'s EVs sit on each path of its plane
    (by path index) from the start and after each of its ECN migrations: (time,
    {path: EVs}) steps, the first at 0 with `initial`."""
    held = Counter(initial)
    steps = [(0.0, dict(held))]
    for e in events:
        if e.get("event") != "migrate" or e.get("host") != host or e.get("peer") != peer:
            continue
        held[e["path"]] -= 1
        held[e["new_path"]] += 1
        steps.append((e["t"] - start, {p: n for p, n in held.items() if n > 0}))
    return steps
