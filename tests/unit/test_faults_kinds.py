"""The fault kinds `switch-down`, `link-down` (both ways or one way), `links-fail` and
faults in place before the start (`before_start`): parsing, expansion, validation, the
ports they act on and how they are logged. Pure: no network, no root."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from experiments.dataplanes.ebpf_switch import fault_ports
from experiments.dataplanes.targets import apply_fault
from experiments.faults import (
    FaultError,
    FaultInjector,
    apply_before_start,
    parse_faults,
)
from experiments.faults.kinds.link import OneWayCut, links_fail_pick, max_links_fail
from tests.steps import running, step
from topologies.ebpf_program import EbpfError
from topologies.model import build_fabric


def wide(planes=2, racks=4, spines=4):
    """A bigger fabric than 2tier-2plane, for the draws of links-fail."""
    from topologies.model import load_topology

    spec = load_topology("2tier-2plane").spec
    return build_fabric(dataclasses.replace(spec, name="wide", planes=planes, racks=racks,
                                            t1_per_plane=spines))


# ---------------------------------------------------------------------- switch-down
def test_a_switch_down_lasts_for_the_rest_of_the_run_or_down_s(fabric):
    (down,) = parse_faults([{"kind": "switch-down", "switch": "p0t0r1", "at_s": 1}], fabric)
    assert (down.t, down.up, down.kind, down.target) == (1, False, "switch-down", ("p0t0r1",))
    series = parse_faults([{"kind": "switch-down", "switch": "p1t1s0", "at_s": 0.5,
                            "down_s": 1, "count": 2, "every_s": 3}], fabric)
    assert [(a.t, a.up) for a in series] == [(0.5, False), (1.5, True), (3.5, False),
                                             (4.5, True)]


class Recorder:
    """A data-plane target that records what it is asked to do."""

    def __init__(self):
        self.calls = []

    def reboot(self, net, fabric, switch, up):
        self.calls.append(("reboot", switch, up))
        return 0

    def set_link(self, net, a, b, up):
        self.calls.append(("set_link", a, b, up))


def test_switch_down_is_a_reboots_halves_and_link_down_both_ways_a_flap(fabric):
    target = Recorder()
    for action in (step(0, False, "switch-down", ("p0t0r0",)),
                   step(1, True, "switch-down", ("p0t0r0",)),
                   step(2, False, "link-down", ("p0t0r0", "p0t1s0")),
                   step(3, True, "link-down", ("p0t0r0", "p0t1s0"))):
        apply_fault(running(fabric, target), action)
    assert target.calls == [("reboot", "p0t0r0", False), ("reboot", "p0t0r0", True),
                            ("set_link", "p0t0r0", "p0t1s0", False),
                            ("set_link", "p0t0r0", "p0t1s0", True)]


# ---------------------------------------------------------------------- link-down
def test_link_down_both_ways_or_from_one_end(fabric):
    (both,) = parse_faults([{"kind": "link-down", "link": ["p0t0r0", "p0t1s0"],
                             "at_s": 0.5}], fabric)
    assert both.target == ("p0t0r0", "p0t1s0") and not isinstance(both.fault, OneWayCut)
    down, up = parse_faults([{"kind": "link-down", "link": ["p0t0r0", "p0t1s0"],
                              "from": "p0t1s0", "at_s": 0.5, "down_s": 1}], fabric)
    assert down.target == up.target == ("p0t1s0>p0t0r0",) and isinstance(down.fault, OneWayCut)
    assert (up.t, up.up) == (1.5, True)
    # The T1 sends on its port 0 (rack 0); only that port's maps are written.
    assert sorted(down.fault.ebpf_ports(fabric)) == [("p0t1s0", "p0t1s0-eth0")]
    assert fault_ports(fabric, [down, both]) == {("p0t1s0", "p0t1s0-eth0")}
    assert down.describe() == "link-down p0t1s0>p0t0r0 down"


@pytest.mark.parametrize("entry,match", [
    ({"kind": "link-down", "link": ["h0", "h1"], "at_s": 0}, r"\.link: must name two linked"),
    ({"kind": "link-down", "link": ["h0", "p0t0r0"], "from": "p0t1s0", "at_s": 0},
     r"\.from: must be one end of the link, h0 or p0t0r0 \(got 'p0t1s0'\)"),
    ({"kind": "link-flap", "link": ["h0", "p0t0r0"], "from": "h0", "at_s": 0, "down_s": 1},
     r"\.from: not a field of link-flap"),
    ({"kind": "switch-down", "switch": "h0", "at_s": 0}, r"\.switch: 'h0' is not a switch"),
    ({"kind": "switch-down", "switch": "p0t0r0", "at_s": 0, "count": 2},
     r"\.count: a fault that lasts for the rest of the run cannot start again"),
    ({"kind": "switch-down", "switch": "p0t0r0"}, r"\.at_s: must be a number of seconds"),
])
def test_bad_switch_and_link_down_entries(fabric, entry, match):
    with pytest.raises(FaultError, match=r"^s\.yaml: faults\[0\]" + match) as caught:
        parse_faults([entry], fabric, "s.yaml", horizon_s=30)
    assert "\n" not in str(caught.value)


def test_a_one_way_link_down_is_a_full_loss_on_the_sending_port(fabric, monkeypatch):
    from experiments.dataplanes import ebpf_switch

    written = []
    monkeypatch.setattr(ebpf_switch, "set_loss",
                        lambda up, ports, p: written.append((ports, p)))
    target = Recorder()
    (down,) = parse_faults([{"kind": "link-down", "link": ["h0", "p0t0r0"], "from": "h0",
                             "at_s": 0}], fabric)
    apply_fault(running(fabric, target), down)
    apply_fault(running(fabric, target), dataclasses.replace(down, up=True))
    assert written == [([("h0", "h0-eth0")], 1.0), ([("h0", "h0-eth0")], 0.0)]
    assert target.calls == []  # no carrier change anywhere


# ---------------------------------------------------------------------- links-fail
def connected(fabric, failed) -> bool:
    """Every plane still connects every pair of racks (a rack with itself too: its T0
    keeps an uplink): some T1 of the plane keeps its links to both."""
    up = {(lk.plane, fabric.node(lk.a).index, fabric.node(lk.b).index)
          for lk in fabric.links if lk.tier == "t0_t1" and (lk.a, lk.b) not in failed}
    spec = fabric.spec
    return all(any((p, r1, s) in up and (p, r2, s) in up for s in range(spec.t1_per_plane))
               for p in range(spec.planes)
               for r1, r2 in itertools.combinations_with_replacement(range(spec.racks), 2))


def test_links_fail_one_after_another_as_link_down_steps(fabric):
    actions = parse_faults([{"kind": "links-fail", "count": 4, "at_s": 1, "every_s": 0.5,
                             "down_s": 3, "seed": 7}], fabric)
    downs = [a for a in actions if not a.up]
    assert [a.t for a in downs] == [1, 1.5, 2, 2.5]
    assert {a.kind for a in actions} == {"link-down"}
    links = [a.target for a in downs]
    assert len(set(links)) == 4  # four different links
    assert all(fabric.node(a).role == "t0" and fabric.node(b).role == "t1" for a, b in links)
    ups = sorted((a.t, a.target) for a in actions if a.up)
    assert ups == [(t + 3, link) for t, link in zip([1, 1.5, 2, 2.5], links)]
    assert connected(fabric, set(links))
    # Without down_s they stay down.
    assert all(not a.up for a in parse_faults([{"kind": "links-fail", "count": 2,
                                                "at_s": 0}], fabric))


@pytest.mark.parametrize("planes,racks,spines", [(2, 2, 2), (2, 4, 4), (1, 3, 3), (3, 2, 5)])
def test_links_fail_keeps_every_plane_connected_whatever_the_seed(planes, racks, spines):
    fabric = wide(planes, racks, spines)
    most = max_links_fail(fabric)
    assert most == planes * racks * (spines - 1)
    for seed in range(40):
        for count in (1, most // 2 or 1, most):
            picked = links_fail_pick(fabric, count, seed)
            assert len({(lk.a, lk.b) for lk in picked}) == count
            assert all(lk.tier == "t0_t1" for lk in picked)
            assert connected(fabric, {(lk.a, lk.b) for lk in picked})
    # And one link more than the most would cut a plane, whichever it is.
    all_but = {(lk.a, lk.b) for lk in links_fail_pick(fabric, most, 0)}
    rest = [(lk.a, lk.b) for lk in fabric.links if lk.tier == "t0_t1"
            and (lk.a, lk.b) not in all_but]
    assert all(not connected(fabric, all_but | {link}) for link in rest)


def test_links_fail_is_the_same_for_a_fabric_and_seed_and_differs_across_seeds():
    fabric = wide()
    entry = {"kind": "links-fail", "count": 20, "at_s": 0, "every_s": 0.1, "seed": 3}
    first, again = parse_faults([entry], fabric), parse_faults([dict(entry)], fabric)
    assert [a.target for a in first] == [a.target for a in again]
    other = parse_faults([dict(entry, seed=4)], fabric)
    assert [a.target for a in first] != [a.target for a in other]
    # Drawn across planes and T1s, not the first links of the list.
    picked = [a.target for a in first]
    assert {fabric.node(b).plane for _, b in picked} == {0, 1}


@pytest.mark.parametrize("entry,match", [
    ({"kind": "links-fail", "count": 5, "at_s": 0},
     r"\.count: must be a number of T0-T1 links from 1 to 4, the most that can fail on "
     r"2tier-2plane with every plane still connecting every pair of racks \(got 5\); "
     r"fix: e\.g\. count: 4"),
    ({"kind": "links-fail", "at_s": 0}, r"\.count: must be a number of T0-T1 links .*None"),
    ({"kind": "links-fail", "count": 2, "at_s": 0, "seed": -1},
     r"\.seed: must be a whole number from 0 to 4294967295"),
    ({"kind": "links-fail", "count": 2, "at_s": 0, "seed": 1.5}, r"\.seed: must be"),
    ({"kind": "links-fail", "count": 2, "at_s": 0, "every_s": -1}, r"\.every_s: must be"),
    ({"kind": "links-fail", "count": 2, "at_s": 0, "link": ["h0", "p0t0r0"]},
     r"\.link: not a field of links-fail"),
    ({"kind": "links-fail", "count": 4, "at_s": 20, "every_s": 5},
     r"\.count: its last repetition starts at 35 s, not before timeout_s"),
])
def test_bad_links_fail_entries(fabric, entry, match):
    with pytest.raises(FaultError, match=r"^s\.yaml: faults\[0\]" + match) as caught:
        parse_faults([entry], fabric, "s.yaml", horizon_s=30)
    assert "\n" not in str(caught.value)


def test_links_fail_on_one_t1_per_plane_says_why_none_can_fail():
    with pytest.raises(FaultError, match=r"faults\[0\]\.kind: wide has one T1 per plane"):
        parse_faults([{"kind": "links-fail", "count": 1, "at_s": 0}], wide(spines=1))


# ---------------------------------------------------------------------- before_start
def test_before_start_steps_are_flagged_at_0_and_their_ends_are_not(fabric):
    actions = parse_faults([
        {"kind": "link-flap", "link": ["p0t0r0", "p0t1s0"], "before_start": True,
         "down_s": 2},
        {"kind": "nic-port-down", "host": "h1", "plane": 1, "before_start": True, "at_s": 0},
        {"kind": "links-fail", "count": 2, "before_start": True, "seed": 1},
        {"kind": "loss", "link": "hosts", "probability": 0.01, "before_start": True},
        {"kind": "switch-down", "switch": "p1t1s1", "at_s": 1},
        {"kind": "link-down", "link": ["h0", "p0t0r0"], "before_start": False, "at_s": 1},
    ], fabric)
    early = [a for a in actions if a.before_start]
    assert [(a.kind, a.t, a.up) for a in early] == [
        ("link-flap", 0, False), ("nic-port-down", 0, False), ("link-down", 0, False),
        ("link-down", 0, False), ("loss", 0, False)]
    (flap_up,) = [a for a in actions if a.up]
    assert (flap_up.kind, flap_up.t, flap_up.before_start) == ("link-flap", 2, False)


@pytest.mark.parametrize("entry,match", [
    ({"kind": "link-down", "link": ["h0", "p0t0r0"], "before_start": True, "at_s": 1},
     r"\.at_s: a fault in place before the start has no start time \(got 1\)"),
    ({"kind": "link-flap", "link": ["h0", "p0t0r0"], "before_start": True, "down_s": 1,
      "count": 3, "every_s": 2}, r"\.count: a fault in place before the start happens once"),
    ({"kind": "links-fail", "count": 2, "before_start": True, "every_s": 1},
     r"\.every_s: links in place before the start all fail at once"),
    ({"kind": "blackhole", "switch": "p0t1s0", "before_start": True, "down_s": 1},
     r"\.before_start: not a field of blackhole"),
    ({"kind": "switch-reboot", "switch": "p0t1s0", "before_start": True, "down_s": 1},
     r"\.before_start: not a field of switch-reboot"),
    ({"kind": "switch-down", "switch": "p0t1s0", "before_start": "yes"},
     r"\.before_start: must be true or false \(got 'yes'\)"),
])
def test_bad_before_start_entries(fabric, entry, match):
    with pytest.raises(FaultError, match=r"^s\.yaml: faults\[0\]" + match) as caught:
        parse_faults([entry], fabric, "s.yaml", horizon_s=30)
    assert "\n" not in str(caught.value)


def test_before_start_steps_are_logged_at_0_and_restored_with_the_rest():
    applied, restored = [], []
    early = step(0, False, "link-down", ("p0t0r0", "p0t1s0"), before_start=True)
    failing = step(0, False, "switch-down", ("p0t1s1",), before_start=True)

    def apply(action):
        if action is failing:
            raise RuntimeError("no such switch here")
        applied.append(action)

    played, errors, done = apply_before_start([early, failing], apply)
    assert done == [early] and applied == [early]
    assert played == [{"t": 0.0, "event": "fault", "fault": "link-down",
                       "target": ["p0t0r0", "p0t1s0"], "up": False, "before_start": True}]
    assert errors == ["switch-down p0t1s1 down (before the start): no such switch here"]
    later = step(0, False, "nic-port-down", ("h1", 0))
    injector = FaultInjector([later], applied.append, clock=lambda: 0.0,
                             played=(played, done))
    injector.start(0.0)
    injector.stop(restore=restored.append)
    assert [e["fault"] for e in injector.log] == ["link-down", "nic-port-down"]
    assert "before_start" not in injector.log[1]
    assert restored == [step(0, True, "link-down", ("p0t0r0", "p0t1s0")),
                        step(0, True, "nic-port-down", ("h1", 0))]
    injector.stop(restore=restored.append)  # a second stop restores nothing again
    assert len(restored) == 2


# ---------------------------------------------------------------------- where eBPF cannot run
class Node:
    pid, inNamespace = 4242, True


class Net:
    def get(self, name):
        return Node()


class UnknownQdisc:
    """The program as a kernel without cls_bpf takes it: attaching fails."""

    @staticmethod
    def attach(pid, intfs, before=()):
        raise EbpfError(f"tc -batch -: Error: Specified qdisc kind is unknown. ({intfs[0]})")


def test_a_one_way_cut_where_ebpf_cannot_run_fails_with_the_reason(fabric, monkeypatch,
                                                                   tmp_path):
    from experiments.dataplanes import ebpf_switch

    (down,) = parse_faults([{"kind": "link-down", "link": ["h0", "p0t0r0"], "from": "h0",
                             "at_s": 0}], fabric)
    monkeypatch.setattr(ebpf_switch.cfg, "OBJECT", tmp_path / "missing.o")
    with pytest.raises(EbpfError, match=r"^h0 h0-eth0: loss, gray-loss and one-way link-down "
                                        r"faults need the eBPF switch program, which is not "
                                        r"built"):
        apply_fault(running(fabric, Recorder(), Net()), down)
    (tmp_path / "missing.o").write_bytes(b"")
    monkeypatch.setattr(ebpf_switch, "_program", lambda ebpf: UnknownQdisc())
    with pytest.raises(EbpfError, match=r"which this machine did not load: tc -batch -: "
                                        r"Error: Specified qdisc kind is unknown\. "
                                        r"\(h0-eth0\)$"):
        apply_fault(running(fabric, Recorder(), Net()), down)
