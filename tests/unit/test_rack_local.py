"""Rack-local paths: a same-rack pair keeps to the direct path through its T0.

The fabric offers a same-rack pair a detour over every T1 of a plane as well, which
shares both host links and the T0 with the direct path and loads two T0 uplinks; the
paper keeps T0-local traffic at the T0. So a connection's EVs, its replacements and
migrations, and the reverse EVs of its answers all name the direct path, unless
`rack_local_paths` says "fallback" (detours while a plane's direct path is bad) or
"all". The RoCE baseline's ECMP keeps same-rack flows at the T0 by its own rule
(topologies/paths.py `ecmp_candidates`).
"""

from __future__ import annotations

import pytest

from hosts.config import ConfigError, ProtocolConfig
from hosts.endpoint import Endpoint
from hosts.simnet import Chaos, Outage, SimNet
from topologies.model import load_topology
from topologies.paths import ecmp_candidates, path_for_ev, shortest_choices

FABRIC = load_topology("2tier-8plane")  # racks of 4 hosts, 4 T1 per plane
SMALL = load_topology("2tier-2plane")  # h0, h1 in rack 0


def same_rack_pairs(fabric):
    hosts = fabric.hosts
    return [(a.index, b.index) for a in hosts for b in hosts
            if a.index != b.index and a.rack == b.rack]


def test_shortest_choices_are_the_direct_path_in_a_rack_and_every_spine_across():
    assert shortest_choices(FABRIC, 0, 1) == (0,)
    assert shortest_choices(FABRIC, 0, 5) == (0, 1, 2, 3)
    # The baseline's ECMP candidates follow the same rule.
    assert [p.spine for p in ecmp_candidates(FABRIC, 0, 1, 3)] == [None]
    assert [p.spine for p in ecmp_candidates(FABRIC, 0, 5, 3)] == [0, 1, 2, 3]


def test_no_same_rack_ev_of_a_fresh_connection_names_a_t1():
    for src in range(len(FABRIC.hosts)):
        endpoint = Endpoint(src, FABRIC, "mrc", ProtocolConfig(), lambda e: None,
                            lambda *a: None, lambda *a: None)
        for a, b in same_rack_pairs(FABRIC):
            if a != src:
                continue
            sender = endpoint._sender(b)
            evs = sender.evs.by_ev.values()
            # Eight per plane, all direct, and their backups too.
            assert len(sender.evs.rotation) == 8 * FABRIC.spec.planes
            assert {path_for_ev(FABRIC, a, b, ev.ev).spine for ev in evs} == {None}
            reverse = endpoint._reverse_set(b)  # the EVs its answers probe
            probes = [reverse._random_ev(p) for p in range(FABRIC.spec.planes)]
            assert {path_for_ev(FABRIC, a, b, ev).spine for ev in probes} == {None}


def test_rack_local_paths_must_be_a_known_mode():
    with pytest.raises(ConfigError, match="protocol.rack_local_paths: must be one of direct"):
        ProtocolConfig(rack_local_paths="spine")


def run_same_rack(mode: str, outages=(), until=1.5, size=1_500_000):
    sim = SimNet(SMALL, seed=1, queues=True, chaos=Chaos(delay_s=0.0005),
                 outages=list(outages), protocol={"rack_local_paths": mode})
    sim.send(0, 1, 0, size)
    sim.run(until, done=lambda: sim.all_done([(0, 1, 0)]))
    return sim


def detour_packets(sim) -> int:
    return sum(n for (plane, spine), n in sim.data_on_path.items() if spine is not None)


def test_same_rack_data_stays_at_the_t0_unless_told_otherwise():
    sim = run_same_rack("direct")
    assert sim.all_done([(0, 1, 0)]) and detour_packets(sim) == 0
    assert run_same_rack("all").all_done([(0, 1, 0)])
    assert detour_packets(run_same_rack("all")) > 0  # the old behaviour, on request


def test_a_plane_whose_direct_path_fails_is_left_or_detoured_by_the_setting():
    # Plane 0's direct paths black-holed from 50 to 250 ms (the T0 no longer hairpins).
    down = [Outage(0, spine=None, start=0.05, end=0.25)]
    direct = run_same_rack("direct", down)
    assert direct.all_done([(0, 1, 0)]) and detour_packets(direct) == 0
    fallback = run_same_rack("fallback", down, size=3_000_000)
    assert fallback.all_done([(0, 1, 0)])
    detoured = [n for (plane, spine), n in fallback.data_on_path.items()
                if plane == 0 and spine is not None]
    assert sum(detoured) > 0
    # Once the direct path is back (its probes earned it), every detour EV made way.
    sender = fallback.hosts[0].senders[1]
    assert fallback.now > 0.6 and not sender.evs.bad
    assert {ev.key[1] for ev in sender.evs.rotation} == {0}
