"""Fault kinds are classes in one registry: a new kind written in one module (here, this
test's own) is read from a scenario, played, restored, told to routing, mapped onto the
single-plane twin and shown by the CLI without a change anywhere else."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.dataplanes.reroute import RoutingState
from experiments.dataplanes.targets import apply_fault
from experiments.faults import KINDS, Env, Fault, FaultError, FaultInjector, Step, parse_faults
from experiments.faults.base import link_of, link_route
from experiments.scenarios.scenario import check_scenario
from tests.steps import running
from topologies.model import Fabric


@pytest.fixture
def cable_cut():
    """A made-up kind: a T0's uplinks to one T1 in every plane go down (a cable tray
    cut under one rack, say)."""

    @dataclasses.dataclass(frozen=True)
    class TrayCut(Fault):
        kind = "tray-cut"
        entry_fields = ("rack", "spine")
        help = "every plane's uplink of one rack to one T1 goes down"
        rack: int
        spine: int

        @classmethod
        def read(cls, entry) -> Fault:
            return cls(entry.get("rack", 0), entry.spine())

        @property
        def target(self) -> tuple:
            return (self.rack, self.spine)

        def links(self, fabric: Fabric):
            return [link_of(fabric, fabric.t0(p, self.rack).name, fabric.t1(p, self.spine).name)
                    for p in range(fabric.spec.planes)]

        def apply(self, env: Env, up: bool) -> None:
            for link in self.links(env.fabric):
                env.target.set_link(env.net, link.a, link.b, up)

        def routing_links(self, fabric: Fabric):
            return {link_route(fabric, link) for link in self.links(fabric)}

        def on_twin(self, fabric: Fabric, twin: Fabric) -> Fault:
            return self

        def cuts(self, nodes, plane):
            return "tray cut" if f"p{plane}t1s{self.spine}" in nodes else None

    yield TrayCut
    del KINDS["tray-cut"]


class Recorder:
    def __init__(self):
        self.calls = []

    def set_link(self, net, a, b, up):
        self.calls.append((a, b, up))


def test_a_new_kind_in_one_module_works_everywhere(fabric, cable_cut):
    scenario = check_scenario({"workload": "transfer", "faults": [
        {"kind": "tray-cut", "rack": 1, "spine": "last", "at_s": 0.5, "down_s": 1}]},
        "s.yaml", fabric)
    down, up = scenario.faults
    assert (down.t, down.up, up.t, up.up) == (0.5, False, 1.5, True)
    assert down.describe() == "tray-cut 1 1 down"
    target = Recorder()
    apply_fault(running(fabric, target), down)
    assert target.calls == [("p0t0r1", "p0t1s1", False), ("p1t0r1", "p1t1s1", False)]
    # Routing learns of it like of any link: h2 and h3 (rack 1) lose their spine-1 paths.
    events = RoutingState(fabric).events(down)
    assert {e.host for e in events} == {0, 1, 2, 3}
    assert all(path[2] == 1 for e in events for path in e.paths)
    # The injector restores it like any other kind.
    injector = FaultInjector([Step(0.0, False, down.fault)], lambda s: None, clock=lambda: 0.0)
    injector.start(0.0)
    restored = []
    injector.stop(restore=restored.append)
    assert restored == [Step(0.0, True, down.fault)]
    assert down.fault.cuts(["h0", "p0t0r0", "p0t1s1", "p0t0r1", "h3"], 0) == "tray cut"


def test_a_kind_is_one_line_when_misused(fabric, cable_cut):
    with pytest.raises(FaultError, match=r"faults\[0\]\.colour: not a field of tray-cut; "
                                        r"fix: use only kind, rack, spine, at_s"):
        parse_faults([{"kind": "tray-cut", "colour": "red", "at_s": 0}], fabric, "s.yaml")
    with pytest.raises(TypeError, match="two fault kinds are called 'tray-cut'"):
        @dataclasses.dataclass(frozen=True)
        class Again(Fault):
            kind = "tray-cut"
