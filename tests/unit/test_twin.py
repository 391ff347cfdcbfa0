"""The single-plane twin where the RoCE baseline runs: its shape, which transports run
on it, and every fault kind mapped onto it."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.dataplanes.twin import by_fabric, fabric_of, twin_of, twin_steps
from experiments.faults import KINDS
from experiments.scenarios.scenario import check_scenario
from topologies.model import load_topology

EIGHT = load_topology("2tier-8plane")
TWIN = twin_of(EIGHT)


def test_the_twin_of_2tier_8plane_is_2tier_1plane():
    shipped = load_topology("2tier-1plane").spec
    assert dataclasses.replace(TWIN.spec, name=shipped.name, source=shipped.source) == shipped
    assert [h.name for h in TWIN.hosts] == [h.name for h in EIGHT.hosts]
    # The same capacity per host and across the bisection.
    spec, twin = EIGHT.spec, TWIN.spec
    assert twin.host_t0.rate_mbit == spec.planes * spec.host_t0.rate_mbit
    assert (twin.t1_per_plane * twin.t0_t1.rate_mbit
            == spec.planes * spec.t1_per_plane * spec.t0_t1.rate_mbit)
    assert twin_of(TWIN) is TWIN


def test_roce_runs_on_the_twin_and_mrc_and_roce_at_planes_on_the_planes():
    assert fabric_of("roce-8", EIGHT) == TWIN and fabric_of("mrc", EIGHT) is EIGHT
    assert fabric_of("roce-8@planes", EIGHT) is EIGHT
    groups = by_fabric(("roce-8", "mrc", "roce-16-pfc", "roce@planes"), EIGHT)
    assert [(f.name, t) for f, t in groups] == [
        ("2tier-8plane", ("mrc", "roce@planes")), ("2tier-8plane-twin", ("roce-8", "roce-16-pfc"))]


# One entry of every kind, on 2tier-8plane, and what it must be on the twin.
ON_TWIN = {
    "link-flap": ({"link": ["p5t0r1", "p5t1s2"], "down_s": 1}, ("p0t0r1", "p0t1s2")),
    "link-down": ({"link": ["h3", "p6t0r0"], "from": "p6t0r0"}, ("p0t0r0>h3",)),
    "links-fail": ({"count": 1, "seed": 4}, None),  # checked below: the same rack and T1
    "switch-reboot": ({"switch": "p7t1s3", "down_s": 1}, ("p0t1s3",)),
    "switch-down": ({"switch": "p2t0r1"}, ("p0t0r1",)),
    "blackhole": ({"switch": "p1t1s1", "down_s": 1}, ("p0t1s1",)),
    "nic-port-down": ({"host": "h5", "plane": 6}, ("h5", 0)),
    "transceiver-flap": ({"host": "h2", "planes": [0, 1, 2, 3], "down_s": 1}, ("h2", 0)),
    "loss": ({"link": ["p3t0r0", "p3t1s0"], "probability": 0.01},
             ("p0t0r0>p0t1s0", "p0t1s0>p0t0r0")),
    "gray-loss": ({"path": ["h0", "h7"], "plane": 4, "spine": 2, "probability": 0.2},
                  ("h0", "h7", 0, 2)),
}


# Kinds with no counterpart on the twin: an entry, and what the note left out says.
NOT_ON_TWIN = {
    "deny": ({"host": "h2", "plane": 3, "down_s": 1}, "queue pairs have no EVs to deny"),
}


def test_every_kind_has_a_twin_mapping_case():
    assert set(ON_TWIN) | set(NOT_ON_TWIN) == set(KINDS)
    assert not set(ON_TWIN) & set(NOT_ON_TWIN)


@pytest.mark.parametrize("kind", sorted(NOT_ON_TWIN))
def test_a_kind_without_a_twin_is_left_out_with_the_reason(kind):
    fields, why = NOT_ON_TWIN[kind]
    scenario = check_scenario({"workload": "transfer", "faults": [
        {"kind": kind, "at_s": 1, **fields}]}, "s.yaml", EIGHT)
    mapped, left_out = twin_steps(scenario.faults, EIGHT, TWIN)
    assert mapped == () and len(left_out) == 1  # one note for the down step alone
    assert "not on the twin" in left_out[0] and why in left_out[0]


@pytest.mark.parametrize("kind", sorted(ON_TWIN))
def test_every_fault_kind_maps_onto_the_twin(kind):
    fields, expected = ON_TWIN[kind]
    scenario = check_scenario({"workload": "transfer", "faults": [
        {"kind": kind, "at_s": 1, **fields}]}, "s.yaml", EIGHT)
    mapped, left_out = twin_steps(scenario.faults, EIGHT, TWIN)
    assert left_out == [] and len(mapped) == len(scenario.faults)
    for before, after in zip(scenario.faults, mapped):
        assert (after.t, after.up, after.before_start) == (before.t, before.up,
                                                           before.before_start)
        if expected is not None:
            assert after.target == expected
        else:
            a, b = before.target
            assert after.target == (f"p0t0r{a[-1]}", f"p0t1s{b[-1]}")
        # Every mapped fault names nodes the twin has, and routing still sees it alike.
        assert bool(after.fault.routing_links(TWIN)) == bool(before.fault.routing_links(EIGHT))


def test_on_a_single_plane_fabric_nothing_is_mapped():
    one = load_topology("2tier-1plane")
    scenario = check_scenario({"workload": "transfer", "faults": [
        {"kind": "switch-down", "switch": "p0t1s0", "at_s": 1}]}, "s.yaml", one)
    assert twin_steps(scenario.faults, one, twin_of(one)) == (scenario.faults, [])
