"""The BMv2 target's CPU-safe link rate, the workload scaled to it, and the switch command
line the bench measures."""

from __future__ import annotations

import json

import pytest

from experiments.dataplanes import bmv2_target
from experiments.dataplanes.bmv2_target import (
    Bmv2Target,
    choose_rate,
    forwarding_budget,
    machine_capacity,
    round_down,
)
from experiments.scenarios.scenario import load_scenario, scaled
from hosts.protocol import DATA_FRAME_BYTES, link_pps
from topologies.bmv2 import switch_argv
from topologies.model import load_topology


def full_load_pps(fabric, rate_mbit: float) -> float:
    """Forwarding steps a second when every host sends full frames on every plane at
    `rate_mbit`, each packet through three switches."""
    spec = fabric.spec
    return spec.hosts * spec.planes * 3 * link_pps(rate_mbit, DATA_FRAME_BYTES)


@pytest.mark.parametrize("topology", ["2tier-1plane", "2tier-2plane", "2tier-8plane"])
@pytest.mark.parametrize("capacity", [3_000, 30_000, 300_000])
def test_full_load_never_asks_more_than_the_share_of_the_switches(topology, capacity):
    """Before a calibration: the hosts may send what asks the switches for their share
    of what they forward alone."""
    fabric = load_topology(topology)
    budget, why = forwarding_budget(capacity, "test", DATA_FRAME_BYTES)
    assert "make calibrate DATAPLANE=bmv2" in why
    choice = choose_rate(fabric, budget, why)
    assert choice.rate_mbit <= fabric.spec.host_t0.rate_mbit
    if choice.capped:
        assert full_load_pps(fabric, choice.rate_mbit) <= bmv2_target.CPU_SHARE * capacity
        # And not needlessly slow: rounded down to two digits only.
        assert full_load_pps(fabric, choice.rate_mbit * 1.11) > bmv2_target.CPU_SHARE * capacity


@pytest.mark.parametrize("budget", [4.0, 25.6, 100.0])
def test_a_calibrated_budget_is_what_every_host_sends_together_at_full_load(budget):
    fabric = load_topology("2tier-8plane")  # 8 hosts x 8 planes, 10 Mbit/s links
    choice = choose_rate(fabric, budget, "calibrated")
    senders = fabric.spec.hosts * fabric.spec.planes
    assert choice.rate_mbit == min(10.0, round_down(budget / senders))
    assert choice.rate_mbit * senders <= budget


def test_rates_are_rounded_down_to_two_digits():
    assert [round_down(v) for v in (0.03729, 2.2999, 18.15, 0.0)] == [0.037, 2.2, 18.0, 0.0]


def test_a_fast_machine_keeps_the_topology_rate():
    fabric = load_topology("2tier-2plane")
    choice = choose_rate(fabric, 1_000_000, "test")
    assert not choice.capped and choice.rate_mbit == fabric.spec.host_t0.rate_mbit
    assert "the topology's own rate" in choice.reason()


def test_capacity_comes_from_this_machines_bench_else_the_measured_figure(tmp_path):
    results = tmp_path / "bmv2-forwarding.json"
    assert machine_capacity(results) == (3 * bmv2_target.MEASURED_PATH_PPS,
                                         bmv2_target.MEASURED_SOURCE)
    rows = [{"setting": "bare", "switches": 3, "pps": 9000},
            {"setting": "testbed", "switches": 3, "pps": 7000},
            {"setting": "testbed", "switches": 1, "pps": 20000}]
    results.write_text(json.dumps({"rows": rows, "measured_at": "2026-01-01T00:00:00"}))
    capacity, source = machine_capacity(results)
    assert capacity == 21000 and "2026-01-01" in source
    results.write_text("{not json")
    assert machine_capacity(results)[0] == 3 * bmv2_target.MEASURED_PATH_PPS


def test_the_target_runs_a_capped_fabric_and_says_so(monkeypatch):
    monkeypatch.setattr(bmv2_target, "machine_capacity", lambda: (3_000.0, "a slow machine"))
    target = Bmv2Target.__new__(Bmv2Target)  # no compiler needed for the rate
    target.write_batches, target.rate = 0, None
    fabric = load_topology("2tier-8plane")
    capped = target.fabric_for(fabric)
    rate = target.rate.rate_mbit
    assert rate < 10
    assert capped.spec.host_t0.rate_mbit == capped.spec.t0_t1.rate_mbit == rate
    # The queue keeps its depth in BDPs (topologies/scale.py), within a packet.
    before = fabric.spec.host_t0.queue_pkts / fabric.spec.bdp_frames
    after = capped.spec.host_t0.queue_pkts / capped.spec.bdp_frames
    assert after == pytest.approx(before, abs=1 / capped.spec.bdp_frames)
    assert [s.name for s in capped.switches] == [s.name for s in fabric.switches]
    fields = target.summary_fields()
    assert fields["bmv2_link_rate_mbit"] == rate
    assert "capped from the topology's 10 Mbit/s" in fields["bmv2_link_rate_reason"]
    assert "a slow machine" in fields["bmv2_link_rate_reason"]
    assert target.data_scale() == pytest.approx(rate / 10)
    # A budget calibrated with the agents replaces the switches' forwarding figure.
    target.fabric_for(fabric, (12.8, "what BMv2's switches and the agents kept up with"))
    assert target.rate.rate_mbit == 0.2
    assert "12.8 Mbit/s together, what BMv2's switches and the agents kept up with" in \
        target.summary_fields()["bmv2_link_rate_reason"]


def test_a_scenario_on_a_capped_fabric_keeps_its_duration_with_fewer_bytes():
    fabric = load_topology("2tier-8plane")
    scenario = load_scenario("link-flap", fabric)
    half = scaled(scenario, 0.5)
    assert half.data_scale == 0.5 and half.faults == scenario.faults
    assert [[t.size * 2 for t in phase] for phase in half.plan] == \
        [[t.size for t in phase] for phase in scenario.plan]
    assert [[(t.src, t.dst, t.msg_id) for t in phase] for phase in half.plan] == \
        [[(t.src, t.dst, t.msg_id) for t in phase] for phase in scenario.plan]
    assert all(t.size == 1 for phase in scaled(scenario, 1e-9).plan for t in phase)
    assert scaled(scenario, 1.0) is scenario
    # At full load a capped link moves the scaled bytes in the time the topology's
    # link moves the scenario's.
    choice = choose_rate(fabric, 3.0, "test")
    assert choice.capped
    assert choice.rate_mbit / choice.data_scale == pytest.approx(choice.topology_mbit)
    assert choose_rate(fabric, 1_000_000, "test").data_scale == 1.0


def test_switch_command_line():
    argv = switch_argv(3, 9093, 50003, [(0, "p0t1s0-eth0"), (1, "p0t1s0-eth1")],
                       "build/mrc_switch.json", "build/logs/p0t1s0", log_level="warn")
    assert argv == ["simple_switch_grpc", "--device-id", "3", "--thrift-port", "9093",
                    "--log-file", "build/logs/p0t1s0", "--log-level", "warn",
                    "-i", "0@p0t1s0-eth0", "-i", "1@p0t1s0-eth1", "build/mrc_switch.json",
                    "--", "--grpc-server-addr", "127.0.0.1:50003", "--priority-queues", "8"]
