"""The CLI's EV commands (`evs`, `ev`, experiments/interactive/cli_ev.py) without a network:
parsing, every mistake one line naming the argument and the fix, the plane form of
deny/allow as the scenarios' `deny` step, and each command run against agents that are
the control API on the simulated network (hosts/mrc_ctl.py over real Endpoints)."""

from __future__ import annotations

import re

import pytest

from experiments.dataplanes.targets import apply_fault
from experiments.faults import Step
from experiments.faults.kinds.controller import Deny
from experiments.interactive.cli_ev import EvCommands, EvRequest, parse_ev, parse_evs
from experiments.run.agents import AgentError, AgentSet
from hosts.config import ProtocolConfig
from hosts.mrc_ctl import MrcCtl
from hosts.protocol import make_ev
from hosts.simnet import SimNet
from tests.unit.test_cli_commands import one_line_error
from topologies.paths import catalogue


# ---------------------------------------------------------------------- parsing
def test_evs_takes_a_host_and_perhaps_a_peer(fabric):
    assert parse_evs(fabric, ["h0"]) == (0, None)
    assert parse_evs(fabric, ["h0", "h3"]) == (0, 3)


@pytest.mark.parametrize("args, names", [
    ([], "evs: arguments"),
    (["h0", "h0"], "evs: peer: is the host itself"),
    (["h7"], "evs: host: 'h7' is not a host"),
])
def test_evs_mistakes_are_one_line(fabric, args, names):
    assert one_line_error(parse_evs, fabric, args).startswith(names)


def test_ev_commands_parse(fabric):
    assert parse_ev(fabric, "deny h2 plane 1".split()) == EvRequest("deny", 2, None, 1)
    assert parse_ev(fabric, "allow h2 h0 plane 1 spine 0".split()) == EvRequest(
        "allow", 2, 0, 1, 0)
    assert parse_ev(fabric, "deny h0 h3 0x01000005".split()) == EvRequest(
        "deny", 0, 3, evs=(make_ev(1, 5),))
    assert parse_ev(fabric, "replace h0 h3 0x00000001 16".split()) == EvRequest(
        "replace", 0, 3, evs=(1, 16))
    assert parse_ev(fabric, "explicit h0 h3 0 0x01000001".split()).evs == (0, make_ev(1, 1))
    assert parse_ev(fabric, "probe h0 h3".split()) == EvRequest("probe", 0, 3)
    assert parse_ev(fabric, "probe h0 h3 plane 0".split()) == EvRequest("probe", 0, 3, 0)
    assert parse_ev(fabric, "events h0 GOOD ASSUMED_BAD".split()).states == (
        "GOOD", "ASSUMED_BAD")
    assert parse_ev(fabric, "events h0 h3 off".split()) == EvRequest("events", 0, 3,
                                                                     states=())
    assert parse_ev(fabric, "events h0".split()).states is None


def test_deny_of_a_plane_is_the_scenarios_deny_step(fabric):
    deny = parse_ev(fabric, "deny h2 h0 plane 1 spine 0".split()).step(fabric)
    assert deny == Step(0.0, False, Deny("h2", 1, 0, "h0"))
    allow = parse_ev(fabric, "allow h2 plane 1".split()).step(fabric)
    assert allow == Step(0.0, True, Deny("h2", 1)) and allow.fault.key() == (
        "deny", ("h2", 1))


@pytest.mark.parametrize("args, names", [
    ([], "ev: action: nothing is not one of deny"),
    (["block", "h0"], "ev: action: 'block' is not one of"),
    (["deny"], "ev deny: host: missing"),
    (["deny", "h2"], "ev deny: arguments: name a plane, or a peer and one EV"),
    (["deny", "h2", "0x1"], "ev deny: arguments: name a plane, or a peer and one EV"),
    (["deny", "h2", "plane", "2"], "ev deny: plane: '2' is not a plane of 2tier-2plane"),
    (["deny", "h2", "plane", "1", "spine", "2"], "ev deny: spine: '2' is not a spine"),
    (["deny", "h2", "plane"], "ev deny: arguments: 'plane' is not expected here"),
    (["deny", "h2", "plane", "1", "plane", "0"], "ev deny: arguments: 'plane'"),
    (["probe", "h0", "h3", "spine", "1"], "ev probe: spine: a T1 is one of a plane's"),
    (["probe", "h0"], "ev probe: peer: missing"),
    (["deny", "h0", "h3", "0x05000000"], "ev deny: EV: 0x05000000 names plane 5"),
    (["deny", "h0", "h3", "zz"], "ev deny: EV: 'zz' is not an EV value"),
    (["replace", "h0", "h3", "1"], "ev replace: arguments: expected OLD and NEW, got 1"),
    (["replace", "h0", "1", "2"], "ev replace: peer: missing"),
    (["explicit", "h0", "h3"], "ev explicit: arguments: no EV given"),
    (["events", "h0", "DENIED"], "ev events: state: 'DENIED' is not a state the API"),
    (["events", "h0", "h0"], "ev events: peer: is the host itself"),
])
def test_ev_mistakes_are_one_line(fabric, args, names):
    assert one_line_error(parse_ev, fabric, args).startswith(names)


# ---------------------------------------------------------------------- on agents
class SimAgents:
    """AgentSet's face to the CLI, its agents the control API of each host on a
    simulated network; what they print goes to `mail`."""

    modify_ev_state = AgentSet.modify_ev_state

    def __init__(self, net: SimNet, transport: str = "mrc"):
        self.net, self.transport, self.mail = net, transport, []
        self.ctls = [MrcCtl(endpoint, lambda m, host=i: self.mail.append({**m, "agent": host}),
                            clock=lambda: net.now)
                     for i, endpoint in enumerate(net.hosts)]

    def command(self, host: int, **cmd) -> None:
        self.ctls[host].command(cmd, self.net.now)


class Session:
    """The FabricSession calls EvCommands makes, on SimAgents."""

    def __init__(self, fabric, transport="mrc"):
        self.fabric, self.sim = fabric, SimNet(fabric, transport=transport, seed=2)
        self.agents = SimAgents(self.sim, transport)
        self.net, self.target, self.faults = self, None, {}

    def send(self, src: int, dst: int, msg_id: int) -> None:
        self.sim.send(src, dst, msg_id, 100_000)
        self.sim.run(self.sim.now + 5, lambda: self.sim.all_done([(src, dst, msg_id)]))

    def fault(self, step: Step) -> str:
        apply_fault(self, step)  # the session stands for its running fabric too
        self.faults[step.fault.key()] = step.fault
        return f"{step.describe()}: done"

    def next_message(self, deadline: float, wanted) -> dict | None:
        self.sim.run(self.sim.now + 0.2, lambda: any(wanted(m) for m in self.agents.mail))
        found = next((m for m in self.agents.mail if wanted(m)), None)
        if found is not None:
            self.agents.mail.remove(found)
        return found

    def ask(self, host: int, event: str, **cmd) -> dict:
        self.agents.command(host, **cmd)
        message = self.next_message(0.0, lambda m: m["agent"] == host and m["event"] in (
            event, "error"))
        if message is None or message["event"] == "error":
            self.agent_failed(message or {"agent": host, "message": "no answer"})
        return message

    def agent_failed(self, message: dict) -> None:
        raise AgentError(f"agent h{message['agent']}: {message.get('message')}")


def run(session: Session, line: str) -> list[str]:
    commands = EvCommands(session)
    words = line.split()
    if words[0] == "evs":
        return commands.evs(*parse_evs(session.fabric, words[1:]))
    return commands.ev(parse_ev(session.fabric, words[1:]))


def test_evs_and_a_controllers_denylist(fabric):
    session = Session(fabric)
    assert run(session, "evs h0 h3") == [
        "h0: no connection to h3 yet (send a message first, or give one an explicit array: "
        "ev explicit)"]
    session.send(0, 3, 0)
    lines = run(session, "evs h0 h3")
    assert lines[0] == ("h0 -> h3: profile 0x3, ev_mode GEN, ev_count 16, ev_min_active "
                        f"{ProtocolConfig().ev_min_active}, ev_event_mask none")
    assert lines[1].split() == ["EV", "port", "spine", "state", "in", "use", "last", "sent",
                                "path", "tx"]
    assert sum(" GOOD " in line and " yes " in line for line in lines) == 16
    assert run(session, "ev deny h0 plane 1") == ["deny h0 plane 1 set: done"]
    assert ("deny", ("h0", 1)) in session.faults
    states = {line.split()[3] for line in run(session, "evs h0 h3")[2:]
              if line.split()[1] == "2"}
    assert states == {"DENIED"}
    assert run(session, "ev allow h0 plane 1") == ["deny h0 plane 1 lifted: done"]
    assert {line.split()[3] for line in run(session, "evs h0 h3")[2:]} == {"GOOD"}


def test_one_ev_replace_explicit_probe_and_events(fabric):
    session = Session(fabric)
    session.send(0, 3, 0)
    assert re.match(r"h0: EV events \(GOOD\) of every connection are collected",
                    run(session, "ev events h0 GOOD")[0])
    assert run(session, "ev events h0")[0].startswith("h0: no EV events of every connection")
    ev = session.sim.hosts[0].senders[3].evs.rotation[0]
    out = run(session, f"ev deny h0 h3 {ev.ev:#x}")
    assert out[0].startswith(f"h0 -> h3: EV {ev.ev:#010x} DENIED (with every EV of the set")
    run(session, f"ev allow h0 h3 {ev.ev:#x}")
    events = run(session, "ev events h0")
    assert events[0].startswith("h0: ") and "GOOD (operator)" in events[1]
    new = make_ev(ev.plane, 2000 + 1 - ev.key[1])
    assert run(session, f"ev replace h0 h3 {ev.ev:#x} {new:#x}") == [
        f"h0 -> h3: EV {ev.ev:#010x} replaced by {new:#010x}"]
    paths = catalogue(fabric, 0, 3)
    assert run(session, f"ev explicit h0 h3 {paths[0].ev} {paths[3].ev}")[0].startswith(
        "h0 -> h3: an explicit array of 2 EVs (ev_mode EXP)")
    assert "ev_mode EXP, ev_count 2" in run(session, "evs h0 h3")[0]
    probes = run(session, "ev probe h0 h3 plane 1")
    assert probes[0] == "h0 -> h3: EV probes on 2 paths, 2 answered"
    assert all(re.search(r"plane 1 spine \d +EV 0x010000\d\d  rtt \d+\.\d+ ms \(port 2\)",
                         line) for line in probes[1:])


def test_the_baseline_has_no_evs_to_show(fabric):
    session = Session(fabric, transport="roce-8@planes")
    text = one_line_error(run, session, "evs h0")
    assert text.startswith("evs: transport: the roce-8@planes agents have no EV profiles")
