"""How a run fits a scenario to links slower than its topology's: shrink or dilate.

A capped fabric (experiments/run/lifecycle.py: the agents' budget, or BMv2's) runs its
links at a share of the topology's rate. A scenario written for the topology's rate
then fits in one of two ways:

- `shrink`: every transfer at that share of its size (scenario.py `scaled`). The run
  lasts as many seconds as the scenario was written for and each fault falls at the
  same point of the transfers, but a message carries that share of its frames: at a
  share of 0.04 a ring all-reduce's chunk is four or five frames an EV, and a loss at
  its end costs a round trip that is a tenth of the whole run.
- `dilate`: time dilation. Every transfer keeps its size and the scenario's clock runs
  slower by the same factor (scenario.py `dilated`): faults, the timeout, flows'
  starts and the baselines' routing delays. Every proportion (frames an EV, round trips
  a fault lasts, round trips in the run) is the one the scenario was written for; the
  run takes 1/share as long.

`auto` (the default) shrinks unless shrinking leaves an EV fewer frames than the
paper's regime asks (experiments/analysis/similarity.py, `frames_per_ev`), and then
dilates: the kernel data plane's calibrated links keep the showcase's messages long
enough and run in the scenario's seconds; BMv2's much slower links dilate.
`make paper` always shrinks (its rows' windows are counted in round trips, and its
time budget is fixed).
"""

from __future__ import annotations

from experiments.analysis.similarity import BANDS, frames_per_ev
from experiments.scenarios.scenario import Scenario, dilated, scale_note, scaled
from topologies.model import Fabric

TIME_MODES = ("auto", "shrink", "dilate")


def fit(scenario: Scenario, fabric: Fabric, share: float, mode: str = "auto") -> Scenario:
    """`scenario` for `fabric`, whose links run at `share` of the topology's rate, in
    `mode` (one of TIME_MODES)."""
    if mode not in TIME_MODES:
        raise ValueError(f"time mode {mode!r}: one of {', '.join(TIME_MODES)}")
    if share >= 1.0 or not scenario.plan:
        return scenario
    shrunk = scaled(scenario, share)
    if mode == "auto":
        fewest = frames_per_ev(fabric, shrunk.protocol, shrunk.plan)
        mode = "dilate" if fewest is not None and fewest < BANDS["frames_per_ev"].low \
            else "shrink"
    return shrunk if mode == "shrink" else dilated(scenario, 1 / share)


def note(scenario: Scenario) -> str | None:
    """What a run says of how `scenario` (as fit()) fits its links; None if it runs as
    written."""
    if scenario.time_dilation > 1.0:
        factor = scenario.time_dilation
        return (f"time dilated {factor:.3g}x: the links run at 1/{factor:.3g} of the "
                f"topology's rate, so every transfer keeps its size and every fault, the "
                f"timeout and the routing delays come {factor:.3g} times later; the run "
                f"lasts about {factor:.3g} times the scenario's seconds")
    if scenario.data_scale < 1.0:
        return scale_note(scenario.data_scale)
    return None
