"""The `deny` kind: a controller's denylist in a scenario (experiments/faults/kinds/
controller.py). It is read like every kind, reaches the host agents running on the
fabric (the running fabric's `agents`, where AgentSet keeps them) as the control API's
MODIFY_EV_STATE, means nothing to the RoCE baseline, and has no twin."""

from __future__ import annotations

import io
import json
import os

import pytest

from experiments.dataplanes.reroute import RoutingState
from experiments.dataplanes.targets import apply_fault
from experiments.dataplanes.twin import twin_of
from experiments.faults import FaultError, FaultInjector, NotOnTwin, parse_faults
from experiments.faults.kinds.controller import AgentsNeeded, Deny
from experiments.run.agents import AgentSet
from experiments.scenarios.scenario import check_scenario
from tests.steps import running, step
from topologies.model import load_topology
from topologies.paths import catalogue


class Proc:
    """An agent process of one host (AgentSet's processes=0) that is ready at once,
    records what it is told, and ends when waited for."""

    def __init__(self):
        self.stdin = io.BytesIO()
        read, self._write = os.pipe()
        os.write(self._write, b'{"event": "ready"}\n')
        self.stdout = os.fdopen(read, "rb")
        self.code = None

    def poll(self):
        return self.code

    def wait(self, timeout=None):
        if self.code is None:
            self.code = 0
            os.close(self._write)
        return 0

    def commands(self) -> list[dict]:
        return [cmd for line in self.stdin.getvalue().splitlines()
                if (cmd := json.loads(line))["cmd"] != "quit"]


class Node:
    def __init__(self):
        self.proc = Proc()

    def popen(self, args, **kwargs):
        return self.proc


class Net:
    def __init__(self, fabric):
        self.nodes = {h.name: Node() for h in fabric.hosts}

    def get(self, name):
        return self.nodes[name]


@pytest.fixture
def agents(fabric, tmp_path):
    agents = AgentSet(running(fabric, None, Net(fabric)), "mrc", tmp_path, processes=0)
    agents.wait_ready()
    yield agents
    agents.stop()


def test_deny_is_read_with_roles_and_its_optional_fields(fabric):
    down, up = parse_faults([{"kind": "deny", "host": "last", "plane": "last", "spine": 1,
                              "peer": "h0", "at_s": 0.5, "down_s": 1}], fabric)
    assert (down.t, down.up, up.t, up.up) == (0.5, False, 1.5, True)
    assert down.fault == Deny("h3", 1, 1, "h0") and down.target == ("h3", 1, 1, "h0")
    assert down.describe() == "deny h3 plane 1 spine 1 toward h0 set"
    (whole,) = parse_faults([{"kind": "deny", "host": "h2", "plane": 0, "at_s": 1}], fabric)
    assert whole.fault == Deny("h2", 0) and whole.target == ("h2", 0)
    assert step(1, False, "deny", ("h2", 0)) == whole  # tests/steps.py builds it too
    # Open-ended: denied for the rest of the run unless down_s is given.
    assert [s.up for s in parse_faults([{"kind": "deny", "host": "h2", "plane": 0,
                                         "at_s": 1}], fabric)] == [False]


@pytest.mark.parametrize("entry, names", [
    ({"kind": "deny", "host": "h9", "plane": 0, "at_s": 0}, r"faults\[0\]\.host"),
    ({"kind": "deny", "host": "h1", "plane": 2, "at_s": 0}, r"faults\[0\]\.plane"),
    ({"kind": "deny", "host": "h1", "plane": 0, "spine": 5, "at_s": 0}, r"faults\[0\]\.spine"),
    ({"kind": "deny", "host": "h1", "plane": 0, "peer": "h1", "at_s": 0},
     r"faults\[0\]\.peer: is the host itself"),
    ({"kind": "deny", "host": "h1", "plane": 0, "at_s": 0, "link": ["h0", "p0t0r0"]},
     r"faults\[0\]\.link: not a field of deny"),
    ({"kind": "deny", "host": "h1", "plane": 0, "before_start": True},
     r"faults\[0\]\.before_start: not a field of deny"),
])
def test_deny_mistakes_name_the_field(fabric, entry, names):
    with pytest.raises(FaultError, match=names):
        parse_faults([entry], fabric)


def test_deny_reaches_the_running_agents_as_modify_ev_state(fabric, agents):
    live = agents.running
    net = live.net
    assert live.agents is agents  # where faults acting through agents find them
    down, up = check_scenario({"workload": "transfer", "faults": [
        {"kind": "deny", "host": "h2", "plane": 1, "at_s": 0.2, "down_s": 1}]},
        "s.yaml", fabric).faults
    # Played like any step, restored at the end like any fault left down.
    injector = FaultInjector([down], lambda s: apply_fault(live, s))
    injector.start(0.0)
    injector.stop(restore=lambda s: apply_fault(live, s))
    assert injector.errors == [] and [e["fault"] for e in injector.log] == ["deny"]
    told = net.get("h2").proc.commands()
    entry = {"op": "MODIFY_EV_STATE", "entries": [{"port": 2}]}
    assert told == [{"cmd": "modify_ev_profile", "ev_op": {
        **entry, "entries": [{"port": 2, "state": s}]}} for s in ("DENIED", "GOOD")]
    assert all(not net.get(h).proc.commands() for h in ("h0", "h1", "h3"))
    # With a T1 and a peer: the agent gets both (dst is the peer's index).
    apply_fault(live, step(0, False, "deny", ("h2", 0, 1, "h0")))
    assert net.get("h2").proc.commands()[-1] == {"cmd": "modify_ev_profile", "dst": 0,
                                                 "ev_op": {"op": "MODIFY_EV_STATE",
                                                           "entries": [{"port": 1, "spine": 1,
                                                                        "state": "DENIED"}]}}
    # Routing sees nothing of it.
    assert RoutingState(fabric).events(down) == []


def test_deny_does_nothing_to_the_baseline_and_needs_agents(fabric, tmp_path):
    net = Net(fabric)
    live = running(fabric, None, net)
    roce = AgentSet(live, "roce-8@planes", tmp_path, processes=0)
    roce.wait_ready()
    apply_fault(live, step(0, False, "deny", ("h2", 1)))
    assert net.get("h2").proc.commands() == []  # queue pairs have no EVs
    roce.stop()
    assert live.agents is None
    with pytest.raises(AgentsNeeded, match="deny h2 plane 1: no host agents run"):
        apply_fault(live, step(0, False, "deny", ("h2", 1)))
    apply_fault(live, step(0, True, "deny", ("h2", 1)))  # nothing to lift


def test_deny_has_no_twin_and_cuts_the_paths_it_names(fabric):
    with pytest.raises(NotOnTwin, match="no EVs"):
        Deny("h2", 1).on_twin(fabric, twin_of(load_topology("2tier-8plane")))
    by_plane = {}
    for path in catalogue(fabric, 2, 0):
        plane = path.plane
        nodes = ["h2", f"p{plane}t0r1", f"p{plane}t1s{path.spine}", f"p{plane}t0r0", "h0"]
        by_plane[(path.plane, path.spine)] = nodes
    assert Deny("h2", 1).cuts(by_plane[(1, 0)], 1).startswith("EVs denied by the controller")
    assert Deny("h2", 1).cuts(by_plane[(0, 0)], 0) is None
    assert Deny("h2", 1, 1).cuts(by_plane[(1, 0)], 1) is None
    assert Deny("h2", 1, 1).cuts(by_plane[(1, 1)], 1)
    assert Deny("h2", 1, None, "h3").cuts(by_plane[(1, 1)], 1) is None
    assert Deny("h3", 1).cuts(by_plane[(1, 1)], 1) is None  # the peer's own paths: not its
