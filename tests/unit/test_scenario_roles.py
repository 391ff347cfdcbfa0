"""Scenarios that name roles fit every topology: each shipped scenario either loads on
each shipped topology or says why it does not apply there; roles resolve as documented
and the run is told what they named."""

from __future__ import annotations

import pytest

from experiments.scenarios import roles
from experiments.scenarios.scenario import (
    NotApplicable,
    available_scenarios,
    check_scenario,
    load_scenario,
)
from topologies.errors import UserError
from topologies.model import available_topologies, load_topology

# Where a shipped scenario means nothing, and the words that say why.
NOT_APPLICABLE = {
    ("nic-port-loss", "2tier-1plane"): "NICs have one port",
    ("start-broken", "2tier-1plane"): "NICs have one port",
    ("nic-port-loss", "cluster-d"): "NICs have one port",
    ("start-broken", "cluster-d"): "NICs have one port",
}


@pytest.mark.parametrize("topology", available_topologies())
@pytest.mark.parametrize("scenario", available_scenarios())
def test_every_shipped_scenario_runs_on_every_shipped_topology_or_says_why_not(scenario,
                                                                                topology):
    fabric = load_topology(topology)
    why = NOT_APPLICABLE.get((scenario, topology))
    if why is None:
        loaded = load_scenario(scenario, fabric)
        assert loaded.name == scenario
        return
    with pytest.raises(NotApplicable, match=f"not applicable on {topology}: .*{why}") as err:
        load_scenario(scenario, fabric)
    assert "\n" not in str(err.value)


def test_the_roles_of_the_shipped_scenarios_name_what_their_comments_say():
    eight, two, one = (load_topology(t) for t in ("2tier-8plane", "2tier-2plane",
                                                  "2tier-1plane"))
    for fabric, t1 in ((eight, "p4t1s1"), (two, "p1t1s1"), (one, "p0t1s1")):
        hole = load_scenario("blackhole", fabric)
        assert hole.faults[0].target == (t1,)
        assert hole.resolved == (f"faults[0].switch: {{t1: 1, plane: middle}} is {t1}",)
    incast = load_scenario("incast", eight)
    victim = [t for t in incast.plan[0] if t.role == "victim"]
    assert [(t.src, t.dst) for t in victim] == [(7, 1)]  # the file's old [7, 1]
    assert sorted(t.src for t in incast.plan[0] if t.role == "data") == [2, 3, 4, 5, 6]
    assert "params.victim: auto is [h7, h1]" in incast.resolved
    (down,) = load_scenario("nic-port-loss", two).faults
    assert down.target == ("h1", 1)


@pytest.mark.parametrize("value,expected", [
    ({"t1": "last", "plane": "last"}, "p7t1s3"),
    ({"t0": 1, "plane": 2}, "p2t0r1"),
    ("p3t1s2", "p3t1s2"),
])
def test_switch_roles(value, expected):
    assert roles.switch(load_topology("2tier-8plane"), value).value.name == expected


@pytest.mark.parametrize("value,expected", [
    ({"uplink": 2, "rack": "last", "plane": 1}, ("p1t0r1", "p1t1s2")),
    ({"host": "last", "plane": "first"}, ("h7", "p0t0r1")),
    ([{"t0": 0, "plane": 0}, {"t1": "last", "plane": 0}], ("p0t0r0", "p0t1s3")),
    (["p0t1s0", "p0t0r1"], ("p0t0r1", "p0t1s0")),
])
def test_link_roles_name_the_link_lower_tier_first(value, expected):
    link = roles.link(load_topology("2tier-8plane"), value).value
    assert (link.a, link.b) == expected


def test_host_roles():
    fabric = load_topology("2tier-8plane")
    assert [roles.host(fabric, v).value.name for v in
            ("h3", 3, "first", "middle", "last", {"rack": 1, "index": "last"})] == [
        "h3", "h3", "h0", "h4", "h7", "h7"]
    assert not roles.host(fabric, "h3").by_role and roles.host(fabric, "last").by_role


@pytest.mark.parametrize("entry,match", [
    ({"kind": "switch-down", "switch": {"t1": 4, "plane": 0}, "at_s": 1},
     r"faults\[0\]\.switch: must be a T1 index 0\.\.3 \(got 4\)"),
    ({"kind": "switch-down", "switch": {"t2": 0}, "at_s": 1},
     r"faults\[0\]\.switch: .* names no switch"),
    ({"kind": "link-flap", "link": {"uplink": 0, "rack": 2}, "at_s": 1, "down_s": 1},
     r"faults\[0\]\.link: must be a rack 0\.\.1 \(got 2\)"),
    ({"kind": "nic-port-down", "host": {"rack": 0, "index": 9}, "plane": 0, "at_s": 1},
     r"faults\[0\]\.host: must be a host's index in its rack 0\.\.3 \(got 9\)"),
])
def test_a_role_the_topology_lacks_is_one_line_naming_the_field(entry, match):
    data = {"workload": "transfer", "faults": [entry]}
    with pytest.raises(UserError, match=r"^s\.yaml: " + match) as err:
        check_scenario(data, "s.yaml", load_topology("2tier-8plane"))
    assert "\n" not in str(err.value)
