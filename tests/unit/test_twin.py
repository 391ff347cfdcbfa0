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


# One entry of every kind, on 2tier-8plane, and the settings its down step gives the
# twin: (kind, target, probability), a link down in one of 8 planes a rate cut to 7/8 of
# the twin link, what is lost silently 1/8 of the twin link's packets.
ON_TWIN = {
    "link-flap": ({"link": ["p5t0r1", "p5t1s2"], "down_s": 1},
                  {("rate-cut", ("p0t0r1", "p0t1s2", "7/8"), None)}),
    "link-down": ({"link": ["h3", "p6t0r0"], "from": "p6t0r0"},
                  {("loss", ("p0t0r0>h3",), 1 / 8)}),
    "links-fail": ({"count": 1, "seed": 4}, None),  # checked below: the same rack and T1
    "switch-reboot": ({"switch": "p7t1s3", "down_s": 1},
                      {("rate-cut", (f"p0t0r{r}", "p0t1s3", "7/8"), None) for r in (0, 1)}),
    "switch-down": ({"switch": "p2t0r1"},
                    {("rate-cut", ("p0t0r1", f"p0t1s{s}", "7/8"), None) for s in range(4)}
                    | {("rate-cut", (f"h{h}", "p0t0r1", "7/8"), None) for h in range(4, 8)}),
    "blackhole": ({"switch": "p1t1s1", "down_s": 1},
                  {("loss", (f"p0t1s1>p0t0r{r}",), 1 / 8) for r in (0, 1)}),
    "nic-port-down": ({"host": "h5", "plane": 6}, {("rate-cut", ("h5", "p0t0r1", "7/8"), None)}),
    "transceiver-flap": ({"host": "h2", "planes": [0, 1, 2, 3], "down_s": 1},
                         {("rate-cut", ("h2", "p0t0r0", "4/8"), None)}),
    "loss": ({"link": ["p3t0r0", "p3t1s0"], "probability": 0.01},
             {("loss", ("p0t0r0>p0t1s0",), 0.01 / 8), ("loss", ("p0t1s0>p0t0r0",), 0.01 / 8)}),
    "gray-loss": ({"path": ["h0", "h7"], "plane": 4, "spine": 2, "probability": 0.2},
                  {("gray-loss", ("h0", "h7", 0, 2), 0.2 / 8)}),
    # Seven planes' links at their rate and one at a quarter: (7 + 1/4) / 8.
    "link-rate": ({"link": ["p5t0r1", "p5t1s2"], "share": 0.25},
                  {("rate-cut", ("p0t0r1", "p0t1s2", "29/32"), None)}),
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


def settings(steps) -> set[tuple]:
    return {(s.kind, s.target, None if s.probability is None else round(s.probability, 12))
            for s in steps}


@pytest.mark.parametrize("kind", sorted(ON_TWIN))
def test_every_fault_kind_maps_onto_the_twin(kind):
    fields, expected = ON_TWIN[kind]
    scenario = check_scenario({"workload": "transfer", "faults": [
        {"kind": kind, "at_s": 1, **fields}]}, "s.yaml", EIGHT)
    mapped, left_out = twin_steps(scenario.faults, EIGHT, TWIN)
    assert left_out == []
    downs = [s for s in mapped if not s.up]
    ups = [s for s in mapped if s.up]
    assert {s.t for s in downs} == {1.0}
    if expected is None:
        (before,) = scenario.faults
        a, b = before.target
        expected = {("rate-cut", (f"p0t0r{a[-1]}", f"p0t1s{b[-1]}", "7/8"), None)}
    assert settings(downs) == {(k, t, None if p is None else round(p, 12))
                               for k, t, p in expected}
    # What goes down comes back when the fault ends (and only then), and routing
    # learns nothing of a link that is only slower or lossy.
    ends = {s.t for s in scenario.faults if s.up}
    assert {s.fault.key() for s in ups} == ({s.fault.key() for s in downs} if ends else set())
    assert {s.t for s in ups} == ends
    assert all(not s.fault.routing_links(TWIN) for s in mapped)


def test_on_a_single_plane_fabric_nothing_is_mapped():
    one = load_topology("2tier-1plane")
    scenario = check_scenario({"workload": "transfer", "faults": [
        {"kind": "switch-down", "switch": "p0t1s0", "at_s": 1}]}, "s.yaml", one)
    assert twin_steps(scenario.faults, one, twin_of(one)) == (scenario.faults, [])
