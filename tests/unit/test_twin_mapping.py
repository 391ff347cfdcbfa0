"""A fault takes the same share of the capacity, and cuts off the same hosts, on the
single-plane twin as on the multi-plane fabric (experiments/dataplanes/twin.py).

Both sides are measured by the same pure functions over their fabric model and the
faults down on them (`condition`, then `capacity_left` and `pair_losses`): the share of
each host's NIC and of each rack's T0 uplinks left, and per ordered host pair the share
of its packets lost, spread over its shortest paths in proportion to what each path has
left, or None when no path connects the pair. The multi-plane side reads each fault as
its kind describes it to routing and to the run (`routing_links`, `links_out`, a loss's
directions, a gray loss's entries); the twin side reads the settings `twin_steps` gives
the twin. Pure: no network, no root.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from ipaddress import IPv6Address, IPv6Network

import pytest

from experiments.dataplanes.reroute import RoutingState
from experiments.dataplanes.twin import twin_of, twin_steps
from experiments.faults import Fault, Step
from experiments.faults.kinds.capacity import RateCut
from experiments.faults.kinds.link import LinkDown, OneWayCut, links_fail_pick
from experiments.faults.kinds.loss import GrayLoss, Loss
from experiments.scenarios.scenario import check_scenario
from topologies.addressing import intf_name
from topologies.model import Fabric, load_topology
from topologies.paths import catalogue, path_nodes

EIGHT = load_topology("2tier-8plane")
CLUSTER_B = load_topology("cluster-b")  # 8 planes of 16 T1, 2 racks of 2 hosts
FABRICS = {"2tier-8plane": EIGHT, "cluster-b": CLUSTER_B}


# ------------------------------------------------------------------ the measure
@dataclass
class Condition:
    """A fabric as faults leave it: each link's share of its rate left (0: down, as
    routing sees it), each direction's share of what it sends lost silently, and the
    gray-loss entries (node, interface, address, prefix length, probability)."""

    kept: dict[frozenset, float] = field(default_factory=dict)
    lost: dict[tuple[str, str], float] = field(default_factory=dict)
    gray: list[tuple[str, str, str, int, float]] = field(default_factory=list)

    def keep(self, a: str, b: str, share: float) -> None:
        link = frozenset({a, b})
        self.kept[link] = min(self.kept.get(link, 1.0), share)

    def lose(self, a: str, b: str, p: float) -> None:
        self.lost[(a, b)] = 1 - (1 - self.lost.get((a, b), 0.0)) * (1 - p)


def route_nodes(fabric: Fabric, route: tuple) -> tuple[str, str]:
    """The two nodes of a link as routing names it."""
    if route[0] == "host":
        _, index, plane = route
        host = fabric.host(index)
        return host.name, fabric.t0(plane, host.rack).name
    _, plane, rack, spine = route
    return fabric.t0(plane, rack).name, fabric.t1(plane, spine).name


def condition(fabric: Fabric, faults) -> Condition:
    found = Condition()
    for fault in faults:
        routed = fault.routing_links(fabric)
        for route in routed:
            found.keep(*route_nodes(fabric, route), 0.0)
        if isinstance(fault, OneWayCut):
            found.lose(fault.sender, fault.receiver, 1.0)
        else:  # out of service without routing knowing (a blackhole): nothing crosses
            for route in fault.links_out(fabric) - routed:
                a, b = route_nodes(fabric, route)
                found.lose(a, b, 1.0)
                found.lose(b, a, 1.0)
        if isinstance(fault, RateCut):
            found.keep(fault.a, fault.b, fault.share)
        if isinstance(fault, Loss):
            for a, b in fault.links:
                found.lose(a, b, fault.probability)
        if isinstance(fault, GrayLoss):
            found.gray += [(*entry, fault.probability) for entry in fault.entries(fabric)]
    return found


def capacity_left(fabric: Fabric, state: Condition) -> dict[str, float]:
    """Per host its NIC's, and per rack its T0s' uplinks', share of the rate left."""

    def share(links) -> float:
        rates = [fabric.link_params(lk.tier).rate_mbit for lk in links]
        left = [r * state.kept.get(frozenset({lk.a, lk.b}), 1.0) for r, lk in zip(rates, links)]
        return sum(left) / sum(rates)

    found = {h.name: share([lk for lk in fabric.links if lk.a == h.name]) for h in fabric.hosts}
    for rack in range(fabric.spec.racks):
        found[f"rack {rack} uplinks"] = share(
            [lk for lk in fabric.links if lk.tier == "t0_t1" and fabric.node(lk.a).index == rack])
    return found


def gray_lost(state: Condition, src: str, plane: int, address: str) -> float:
    """What the longest gray-loss prefix matching the packet loses (the eBPF program's
    LPM map takes that one only)."""
    matches = [(plen, p) for node, intf, prefix, plen, p in state.gray
               if (node, intf) == (src, intf_name(src, plane))
               and IPv6Address(address) in IPv6Network(f"{prefix}/{plen}", strict=False)]
    return max(matches)[1] if matches else 0.0


def pair_losses(fabric: Fabric, state: Condition) -> dict[tuple[int, int], float | None]:
    """Per ordered host pair, the share of its packets lost, spread over its shortest
    paths (across racks through a T1, in a rack the direct one) in proportion to the
    rate each has left; None when nothing gets through."""
    found = {}
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src == dst:
                continue
            weights, losses = [], []
            for path in catalogue(fabric, src.index, dst.index):
                if (path.spine is None) != (src.rack == dst.rack):
                    continue
                nodes = path_nodes(fabric, path.usids, src.name)
                hops = list(zip(nodes, nodes[1:]))
                weights.append(min(state.kept.get(frozenset(hop), 1.0) for hop in hops))
                delivered = math.prod(1 - state.lost.get(hop, 0.0) for hop in hops)
                delivered *= 1 - gray_lost(state, src.name, path.plane, path.address)
                losses.append(1 - delivered)
            total = sum(weights)
            lost = sum(w * x for w, x in zip(weights, losses)) / total if total else 1.0
            found[(src.index, dst.index)] = None if lost >= 1 - 1e-12 else lost
    return found


def down_after(steps) -> list[Fault]:
    """The faults down once the steps are played (as the fault injector tracks them)."""
    down: dict[tuple, Fault] = {}
    for step in steps:
        if step.up:
            down.pop(step.fault.key(), None)
        else:
            down[step.fault.key()] = step.fault
    return list(down.values())


def assert_same_share(fabric: Fabric, steps) -> tuple[dict, dict]:
    """After every step of `steps`, the twin loses what the planes lose. Returns the last
    measures of the planes (capacity, pairs)."""
    twin = twin_of(fabric)
    for n in range(1, len(steps) + 1):
        mapped, left_out = twin_steps(tuple(steps[:n]), fabric, twin)
        assert left_out == []
        planes = condition(fabric, down_after(steps[:n]))
        single = condition(twin, down_after(mapped))
        capacity = capacity_left(fabric, planes)
        assert capacity_left(twin, single) == pytest.approx(capacity), steps[n - 1].describe()
        pairs, twin_pairs = pair_losses(fabric, planes), pair_losses(twin, single)
        cut = {pair for pair, lost in pairs.items() if lost is None}
        assert {pair for pair, lost in twin_pairs.items() if lost is None} == cut
        assert ({p: x for p, x in twin_pairs.items() if p not in cut}
                == pytest.approx({p: x for p, x in pairs.items() if p not in cut}))
    return capacity, pairs


def timeline(fabric: Fabric, *faults: dict):
    return check_scenario({"workload": "transfer", "faults": list(faults)}, "s.yaml",
                          fabric).faults


# ------------------------------------------------------------------ every kind
# One entry of every kind that maps onto the twin, on each fabric (deny has none:
# test_twin.py), each ending before the next starts.
def every_kind(fabric: Fabric) -> list[dict]:
    last_host = fabric.hosts[-1].name
    spines = fabric.spec.t1_per_plane
    return [
        {"kind": "link-flap", "link": ["p5t0r1", f"p5t1s{spines - 2}"], "down_s": 1},
        {"kind": "link-down", "link": ["p3t0r0", "p3t1s1"], "down_s": 1},
        {"kind": "link-down", "link": ["h1", "p6t0r0"], "from": "p6t0r0", "down_s": 1},
        {"kind": "link-down", "link": ["p2t0r1", "p2t1s0"], "from": "p2t0r1", "down_s": 1},
        {"kind": "links-fail", "count": 3, "seed": 4, "every_s": 0.1, "down_s": 0.5},
        {"kind": "switch-reboot", "switch": f"p7t1s{spines - 1}", "down_s": 1},
        {"kind": "switch-down", "switch": "p2t0r1", "down_s": 1},
        {"kind": "switch-down", "switch": "p4t1s0", "down_s": 1},
        {"kind": "blackhole", "switch": "p1t1s1", "down_s": 1},
        {"kind": "blackhole", "switch": "p6t0r0", "down_s": 1},
        {"kind": "nic-port-down", "host": last_host, "plane": 6, "down_s": 1},
        {"kind": "transceiver-flap", "host": "h0", "planes": [0, 1, 2, 3], "down_s": 1},
        {"kind": "loss", "link": ["p3t0r0", "p3t1s0"], "probability": 0.01, "down_s": 1},
        {"kind": "loss", "link": ["h1", "p5t0r0"], "from": "h1", "probability": 0.3,
         "down_s": 1},
        {"kind": "loss", "link": "hosts", "probability": 0.02, "down_s": 1},
        {"kind": "gray-loss", "path": ["h0", last_host], "plane": 4, "spine": 2,
         "probability": 0.2, "down_s": 1},
        {"kind": "gray-loss", "switch": "p3t1s1", "probability": 0.5, "down_s": 1},
        {"kind": "link-rate", "link": ["p3t0r1", "p3t1s1"], "share": 0.25, "down_s": 1},
        {"kind": "link-rate", "link": ["h1", "p2t0r0"], "share": 0.5, "down_s": 1},
    ]


CASES = [(name, entry) for name, fabric in FABRICS.items() for entry in every_kind(fabric)]


@pytest.mark.parametrize("name,entry", CASES,
                         ids=[f"{n}-{e['kind']}-{i}" for i, (n, e) in enumerate(CASES)])
def test_every_kind_takes_the_same_share_on_the_twin(name, entry):
    fabric = FABRICS[name]
    steps = timeline(fabric, {**entry, "at_s": 1})
    capacity, pairs = assert_same_share(fabric, steps)
    # Each fault ends: everything is back on both.
    assert all(share == 1.0 for share in capacity.values())
    assert all(lost == 0 for lost in pairs.values())


def test_the_measure_sees_every_fault_on_both():
    # While each fault is down, both sides lose capacity or packets: the equality above
    # is no equality of two nothings.
    for name, entry in CASES:
        fabric, twin = FABRICS[name], twin_of(FABRICS[name])
        downs = tuple(s for s in timeline(fabric, {**entry, "at_s": 1}) if not s.up)
        mapped, _ = twin_steps(downs, fabric, twin)
        for on, faults in ((fabric, [s.fault for s in downs]), (twin, down_after(mapped))):
            state = condition(on, faults)
            assert (min(capacity_left(on, state).values()) < 1
                    or max(x or 0 for x in pair_losses(on, state).values()) > 0), entry


# ------------------------------------------------------------------ the rows
def broken_at_start(fabric: Fabric) -> list[dict]:
    """make paper's broken-at-start: one uplink of rack 0's T0 in each of planes 0-3
    down before the start, to T1 p + 1."""
    spines = fabric.spec.t1_per_plane
    return [{"kind": "link-down", "link": [f"p{p}t0r0", f"p{p}t1s{(p + 1) % spines}"],
             "before_start": True} for p in range(4)]


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_broken_at_start_slows_four_uplinks_of_rack_0_and_cuts_off_nobody(name):
    fabric = FABRICS[name]
    spines = fabric.spec.t1_per_plane
    steps = timeline(fabric, *broken_at_start(fabric))
    capacity, pairs = assert_same_share(fabric, steps)
    assert capacity["rack 0 uplinks"] == pytest.approx(1 - 4 / (8 * spines))
    assert None not in pairs.values()  # rack 0 reaches every host, on both
    mapped, _ = twin_steps(steps, fabric, twin_of(fabric))
    # Each broken link is 1/8 of the twin's link to T1 p + 1: 7/8 of its rate left.
    assert [(s.t, s.up, s.before_start, s.fault) for s in mapped] == [
        (0.0, False, True, RateCut("p0t0r0", f"p0t1s{(p + 1) % spines}", 7, 8))
        for p in range(4)]
    routing = RoutingState(twin_of(fabric))
    assert all(routing.events(step) == [] for step in mapped)


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_twenty_links_failing_one_after_another(name):
    fabric = FABRICS[name]
    twin = twin_of(fabric)
    steps = timeline(fabric, {"kind": "links-fail", "count": 20, "seed": 1, "at_s": 0.1,
                              "every_s": 0.05})
    capacity, pairs = assert_same_share(fabric, steps)
    assert None not in pairs.values()
    mapped, _ = twin_steps(steps, fabric, twin)
    # Every twin link keeps (8 - k)/8 of its rate for k of its planes' links failed; a
    # twin link goes down only when all 8 of its links did.
    failed: dict[tuple[str, str], int] = {}
    for link in links_fail_pick(fabric, 20, 1):
        pair = (f"p0t0r{fabric.node(link.a).index}", f"p0t1s{fabric.node(link.b).index}")
        failed[pair] = failed.get(pair, 0) + 1
    left = {(f.a, f.b): f for f in down_after(mapped)}
    assert left == {pair: RateCut(*pair, 8 - k, 8) if k < 8 else LinkDown(*pair)
                    for pair, k in failed.items()}
    assert sum(failed.values()) == 20
    routing = RoutingState(twin)
    events = [e for step in mapped for e in routing.events(step)]
    assert events == [] or any(k == 8 for k in failed.values())


# ------------------------------------------------------------------ overlaps
def test_a_plane_link_out_twice_is_out_once():
    # A T1 down and one of its links down in the same plane: the link is 1/8 of the twin
    # link once, until both end.
    steps = timeline(EIGHT, {"kind": "switch-down", "switch": "p0t1s1", "at_s": 1, "down_s": 1},
                     {"kind": "link-down", "link": ["p0t0r0", "p0t1s1"], "at_s": 1.5,
                      "down_s": 1})
    assert_same_share(EIGHT, steps)
    mapped, _ = twin_steps(steps, EIGHT, twin_of(EIGHT))
    assert [(s.t, s.up, s.target) for s in mapped] == [
        (1.0, False, ("p0t0r0", "p0t1s1", "7/8")), (1.0, False, ("p0t0r1", "p0t1s1", "7/8")),
        (2.0, True, ("p0t0r1", "p0t1s1", "7/8")),  # the link of rack 0 is still out
        (2.5, True, ("p0t0r0", "p0t1s1", "7/8"))]


def test_links_out_in_several_planes_add_up_and_come_back_one_by_one():
    entries = [{"kind": "link-flap", "link": [f"p{p}t0r1", f"p{p}t1s2"],
                "at_s": 1 + 0.1 * p, "down_s": 1} for p in range(3)]
    steps = timeline(EIGHT, *entries)
    assert_same_share(EIGHT, steps)
    mapped, _ = twin_steps(steps, EIGHT, twin_of(EIGHT))
    assert [(s.t, s.up, s.target[-1]) for s in mapped] == [
        (1.0, False, "7/8"), (1.1, False, "6/8"), (1.2, False, "5/8"),
        (2.0, False, "6/8"), (2.1, False, "7/8"), (2.2, True, "7/8")]


def test_a_slowed_link_beside_a_link_down_keeps_its_share_of_the_twin_link():
    steps = timeline(EIGHT,
                     {"kind": "link-rate", "link": ["p1t0r1", "p1t1s2"], "share": 0.25,
                      "before_start": True},
                     {"kind": "link-down", "link": ["p4t0r1", "p4t1s2"], "at_s": 1,
                      "down_s": 1})
    assert_same_share(EIGHT, steps)
    mapped, _ = twin_steps(steps, EIGHT, twin_of(EIGHT))
    # 8 planes: one at a quarter (29/32), then one more out (25/32), then back.
    assert [(s.t, s.up, s.target[-1]) for s in mapped] == [
        (0.0, False, "29/32"), (1.0, False, "25/32"), (2.0, False, "29/32")]


def test_a_loss_beside_a_link_down_is_a_share_of_the_planes_still_up():
    steps = timeline(EIGHT, {"kind": "link-down", "link": ["p0t0r0", "p0t1s1"], "at_s": 1},
                     {"kind": "loss", "link": ["p1t0r0", "p1t1s1"], "probability": 0.07,
                      "at_s": 1})
    assert_same_share(EIGHT, steps)
    mapped, _ = twin_steps(steps, EIGHT, twin_of(EIGHT))
    losses = {s.target: s.probability for s in mapped if s.kind == "loss"}
    assert losses == pytest.approx({("p0t0r0>p0t1s1",): 0.01, ("p0t1s1>p0t0r0",): 0.01})


def test_a_gray_path_inside_a_gray_t1_holds_both():
    steps = timeline(EIGHT, {"kind": "gray-loss", "switch": "p3t1s2", "probability": 0.4,
                             "at_s": 1},
                     {"kind": "gray-loss", "path": ["h0", "h6"], "plane": 5, "spine": 2,
                      "probability": 0.8, "at_s": 1})
    assert_same_share(EIGHT, steps)


# ------------------------------------------------------------------ cut off on both
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_a_host_is_cut_off_on_the_twin_only_when_it_is_on_the_planes(name):
    fabric = FABRICS[name]
    twin = twin_of(fabric)
    host = fabric.hosts[1]
    steps = timeline(fabric, *({"kind": "nic-port-down", "host": host.name, "plane": p,
                                "at_s": 1 + 0.1 * p} for p in range(8)))
    capacity, pairs = assert_same_share(fabric, steps)
    assert capacity[host.name] == 0
    assert {pair for pair, lost in pairs.items() if lost is None} == {
        pair for pair in pairs if host.index in pair}
    mapped, _ = twin_steps(steps, fabric, twin)
    assert [s.kind for s in mapped][-2:] == ["link-down", "rate-cut"]
    # Routing on the twin learns of the host's port only when the last of its 8 goes.
    routing = RoutingState(twin)
    told = [bool(routing.events(step)) for step in mapped]
    assert told == [False] * (len(mapped) - 2) + [True, False]


def test_a_rack_is_cut_off_on_both_when_its_t0_is_down_in_every_plane():
    steps = timeline(EIGHT, *({"kind": "switch-down", "switch": f"p{p}t0r0", "at_s": 1}
                              for p in range(8)))
    capacity, pairs = assert_same_share(EIGHT, steps)
    assert capacity["rack 0 uplinks"] == 0
    rack0 = {h.index for h in EIGHT.hosts if h.rack == 0}
    assert {pair for pair, lost in pairs.items() if lost is None} == {
        pair for pair in pairs if set(pair) & rack0}


def test_a_t1_blackholed_in_every_plane_loses_everything_through_it_silently():
    steps = timeline(EIGHT, *({"kind": "blackhole", "switch": f"p{p}t1s3", "at_s": 1,
                               "down_s": 2} for p in range(8)))
    assert_same_share(EIGHT, steps)
    mapped, _ = twin_steps(steps, EIGHT, twin_of(EIGHT))
    lost = [s.probability for s in mapped if s.target == ("p0t1s3>p0t0r0",) and not s.up]
    assert lost == pytest.approx([n / 8 for n in range(1, 9)] + [n / 8 for n in range(7, 0, -1)])
    assert all(not s.fault.routing_links(twin_of(EIGHT)) for s in mapped)


def test_steps_before_the_start_stay_before_the_start():
    steps = timeline(EIGHT, *broken_at_start(EIGHT),
                     {"kind": "link-down", "link": ["p5t0r0", "p5t1s1"], "before_start": True})
    mapped, _ = twin_steps(steps, EIGHT, twin_of(EIGHT))
    assert all(s.before_start and s.t == 0 for s in mapped)
    assert mapped[-1].target == ("p0t0r0", "p0t1s1", "6/8")
    assert isinstance(mapped[-1], Step)
