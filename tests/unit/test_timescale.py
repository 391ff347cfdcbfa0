"""Fitting a scenario to slower links: shrinking its transfers or dilating its clock."""

from __future__ import annotations

import pytest

from experiments.analysis.similarity import BANDS, frames_per_ev
from experiments.run import timescale
from experiments.scenarios.scenario import ROUTING_DELAYS, dilated, load_scenario, scaled
from hosts.config import ProtocolConfig
from topologies.model import load_topology

FLOWS = """\
name: two-flows
workload: flows
params: {flows: [[0, 4], [1, 5]], message_bytes: 600000, start_s: [0, 1.5]}
transports: [mrc, roce]
timeout_s: 30
protocol: {reconvergence_s: 2.0}
faults:
  - {kind: link-down, link: [p0t0r0, p0t1s0], at_s: 0.5, down_s: 1.0}
"""


@pytest.fixture(scope="module")
def fabric():
    return load_topology("2tier-8plane")


def test_a_dilated_scenario_keeps_its_bytes_and_runs_every_time_later(fabric):
    scenario = load_scenario("link-flap", fabric)
    slow = dilated(scenario, 25.0)
    assert slow.time_dilation == 25.0 and slow.data_scale == 1.0
    assert slow.plan == scenario.plan  # every transfer at its size
    assert [s.t for s in slow.faults] == pytest.approx([25 * s.t for s in scenario.faults])
    assert [(s.up, s.fault) for s in slow.faults] == [(s.up, s.fault) for s in scenario.faults]
    assert slow.timeout_s == 25 * scenario.timeout_s
    default = ProtocolConfig()
    for name in ROUTING_DELAYS:  # the network's own delays stretch with the faults
        assert slow.protocol[name] == pytest.approx(25 * getattr(default, name))
    assert dilated(scenario, 1.0) is scenario


def test_a_dilated_flow_starts_later_and_a_scenario_routing_delay_stretches(fabric, tmp_path):
    path = tmp_path / "two-flows.yaml"
    path.write_text(FLOWS)
    scenario = load_scenario(str(path), fabric)
    slow = dilated(scenario, 4.0)
    starts = [t.start_s for phase in slow.plan for t in phase]
    assert starts == pytest.approx([4 * t.start_s for phase in scenario.plan for t in phase])
    assert max(starts) == pytest.approx(6.0)
    assert slow.protocol["reconvergence_s"] == pytest.approx(8.0)  # the scenario's 2 s
    assert scenario.protocol == {"reconvergence_s": 2.0}  # the original is untouched


def test_auto_shrinks_while_an_ev_keeps_enough_frames_and_dilates_below(fabric):
    scenario = load_scenario("link-flap", fabric)
    low = BANDS["frames_per_ev"].low
    full = frames_per_ev(fabric, scenario.protocol, scenario.plan)
    edge = low / full  # the share at which a shrunk EV has just the band's frames
    above = timescale.fit(scenario, fabric, edge * 1.05)
    assert above.data_scale == pytest.approx(edge * 1.05) and above.time_dilation == 1.0
    assert frames_per_ev(fabric, above.protocol, above.plan) >= low
    below = timescale.fit(scenario, fabric, edge * 0.95)
    assert below.data_scale == 1.0 and below.time_dilation == pytest.approx(1 / (edge * 0.95))
    assert below.plan == scenario.plan
    # BMv2's links here (0.04 of the topology's rate) dilate; the kernel's (0.25) shrink.
    assert timescale.fit(scenario, fabric, 0.04).time_dilation == pytest.approx(25)
    assert timescale.fit(scenario, fabric, 0.25).data_scale == 0.25


def test_an_explicit_mode_is_obeyed_and_full_rate_runs_as_written(fabric):
    scenario = load_scenario("link-flap", fabric)
    assert timescale.fit(scenario, fabric, 0.04, "shrink") == scaled(scenario, 0.04)
    assert timescale.fit(scenario, fabric, 0.25, "dilate") == dilated(scenario, 4.0)
    assert timescale.fit(scenario, fabric, 1.0, "dilate") is scenario
    with pytest.raises(ValueError, match="one of auto, shrink, dilate"):
        timescale.fit(scenario, fabric, 0.5, "stretch")


def test_the_run_says_how_its_scenario_was_fit(fabric):
    scenario = load_scenario("link-flap", fabric)
    assert timescale.note(scenario) is None
    assert "every transfer at 0.25 of its size" in timescale.note(scaled(scenario, 0.25))
    said = timescale.note(dilated(scenario, 25.0))
    assert said.startswith("time dilated 25x") and "25 times the scenario's seconds" in said
