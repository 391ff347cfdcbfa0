"""The control API (hosts/mrc_ctl.py, shaped as OCP MRC's mrc_ctl.h) end to end: commands
to one host's real Endpoint on the simulated network, answers as the agent would print
them, and the packets that follow (which paths data takes, probes and their replies).
"""

from __future__ import annotations

import json
import re

import pytest

from hosts.agent import Agent
from hosts.mrc_ctl import MrcCtl
from hosts.protocol import make_ev
from hosts.simnet import Outage, SimNet
from topologies.paths import catalogue

MSG = 200_000


class Host:
    """One host's control API on a simulated network, and what it answered."""

    def __init__(self, net: SimNet, index: int):
        self.net, self.index, self.out = net, index, []
        self.ctl = MrcCtl(net.hosts[index], self.out.append, clock=lambda: net.now)

    def __call__(self, **cmd) -> dict:
        """Run a command now; its answer (or error)."""
        self.out.clear()
        self.ctl.command(cmd, self.net.now)
        (answer,) = [m for m in self.out if m["event"] in (cmd["cmd"], "error")]
        return answer

    def profile(self, dst: int) -> dict:
        (profile,) = self(cmd="query_ev_profile", dst=dst)["profiles"]
        return profile


def transfer(net: SimNet, src: int, dst: int, msg_id: int, size: int = MSG) -> None:
    net.send(src, dst, msg_id, size)
    net.run(net.now + 10, lambda: net.all_done([(src, dst, msg_id)]))
    assert net.all_done([(src, dst, msg_id)])


def tx_by_path(profile: dict) -> dict[tuple[int, int], int]:
    return {(e["plane"], e["path"]): e["path_tx"] for e in profile["entries"]}


@pytest.fixture
def net(fabric):
    return SimNet(fabric, seed=3)


def test_a_profile_exists_from_the_first_message_and_lists_every_ev(net):
    h0 = Host(net, 0)
    error = h0(cmd="query_ev_profile", dst=3)
    assert error["errno"] == "ENOENT" and "no connection to host 3" in error["message"]
    transfer(net, 0, 3, 0)
    profile = h0.profile(3)
    assert (profile["dst"], profile["profile_id"], profile["ev_mode"]) == (3, 3, "GEN")
    assert profile["ev_count"] == 16 and profile["ev_event_mask"] == []
    active = [e for e in profile["entries"] if e["active"]]
    assert len(active) == 16 and {e["state"] for e in active} == {"GOOD"}
    assert {(e["port"], e["plane"]) for e in active} == {(1, 0), (2, 1)}
    assert {e["spine"] for e in active} == {0, 1} and all(e["last_sent"] for e in active)
    # QUERY_EV_STATE: the EVs named, UNKNOWN for one the profile does not hold.
    known = active[0]["ev"]
    unknown = make_ev(1, 12345)
    answer = h0(cmd="query_ev_profile", dst=3, ev_op={
        "op": "QUERY_EV_STATE", "entries": [{"ev": known}, {"ev": hex(unknown)}]})
    assert [(e["ev"], e["state"]) for e in answer["profiles"][0]["entries"]] == [
        (known, "GOOD"), (unknown, "UNKNOWN")]


def test_a_denied_ev_carries_nothing_until_it_is_good_again(net):
    h0 = Host(net, 0)
    transfer(net, 0, 3, 0)
    victim = next(e for e in h0.profile(3)["entries"] if e["active"])
    key = (victim["plane"], victim["path"])
    answer = h0(cmd="modify_ev_profile", dst=3, ev_op={
        "op": "MODIFY_EV_STATE", "entries": [{"ev": victim["ev"], "state": "DENIED"}]})
    assert (answer["entries"], answer["profiles"]) == (1, [3])
    denied = h0.profile(3)
    # The EVs of a path share its fate: every EV of the path is DENIED and out of use.
    on_path = [e for e in denied["entries"] if (e["plane"], e["path"]) == key]
    assert {e["state"] for e in on_path} == {"DENIED"} and not any(e["active"] for e in on_path)
    before = tx_by_path(denied)
    transfer(net, 0, 3, 1)
    after = tx_by_path(h0.profile(3))
    assert after[key] == before[key] and sum(after.values()) > sum(before.values())
    h0(cmd="modify_ev_profile", dst=3, ev_op={
        "op": "MODIFY_EV_STATE", "entries": [{"ev": victim["ev"], "state": "GOOD"}]})
    transfer(net, 0, 3, 2)
    again = h0.profile(3)
    assert tx_by_path(again)[key] > after[key]
    assert {e["state"] for e in again["entries"] if (e["plane"], e["path"]) == key} == {"GOOD"}
    kinds = [e["event"] for e in net.events if e["host"] == 0]
    assert "deny" in kinds and "allow" in kinds


def test_a_plane_denied_for_every_peer_holds_for_connections_made_later(net):
    """Clustermapper's "deny plane 1 of h0": a port, no dst."""
    h0 = Host(net, 0)
    transfer(net, 0, 3, 0)
    answer = h0(cmd="modify_ev_profile", ev_op={
        "op": "MODIFY_EV_STATE", "entries": [{"port": 2, "state": "DENIED"}]})
    assert answer["profiles"] == [3]
    assert {e["state"] for e in h0.profile(3)["entries"] if e["plane"] == 1} == {"DENIED"}
    transfer(net, 0, 2, 0)  # a new connection: the rule holds for it too
    fresh = h0.profile(2)
    assert {e["state"] for e in fresh["entries"] if e["plane"] == 1} == {"DENIED"}
    assert all(e["path_tx"] == 0 for e in fresh["entries"] if e["plane"] == 1)
    assert sum(e["path_tx"] for e in fresh["entries"]) > 0
    h0(cmd="modify_ev_profile", ev_op={
        "op": "MODIFY_EV_STATE", "entries": [{"port": 2, "state": "GOOD"}]})
    assert h0.ctl.rules == []
    transfer(net, 0, 2, 1)
    assert sum(e["path_tx"] for e in h0.profile(2)["entries"] if e["plane"] == 1) > 0


def test_one_t1_denied_by_port_and_spine(net):
    h0 = Host(net, 0)
    transfer(net, 0, 3, 0)
    h0(cmd="modify_ev_profile", dst=3, ev_op={
        "op": "MODIFY_EV_STATE", "entries": [{"port": 1, "spine": 1, "state": "DENIED"}]})
    states = {(e["plane"], e["spine"], e["state"]) for e in h0.profile(3)["entries"]}
    assert (0, 1, "DENIED") in states and (0, 0, "DENIED") not in states
    assert (1, 1, "DENIED") not in states


def test_replace_ev_and_an_explicit_array(net, fabric):
    h0 = Host(net, 0)
    transfer(net, 0, 3, 0)
    old = next(e for e in h0.profile(3)["entries"] if e["active"] and e["plane"] == 0)
    new = make_ev(0, 4242 * 2 + 1 - old["path"])  # the plane's other path
    h0(cmd="modify_ev_profile", dst=3, ev_op={
        "op": "REPLACE_EV", "entries": [{"ev": old["ev"], "ev_new": new, "state": "GOOD",
                                         "flags": ["ALL_COPIES"]}]})
    evs = {e["ev"]: e for e in h0.profile(3)["entries"]}
    assert old["ev"] not in evs and evs[new]["active"] and evs[new]["path"] != old["path"]
    transfer(net, 0, 3, 1)
    assert {e["ev"]: e for e in h0.profile(3)["entries"]}[new]["last_sent"] is not None
    # EXPLICIT: the connection sprays over exactly the array given, here one path a plane.
    paths = {(p.plane, p.spine): p.ev for p in catalogue(fabric, 0, 3)}
    array = [paths[(0, 1)], paths[(1, 0)]]
    answer = h0(cmd="modify_ev_profile", dst=3, ev_mode="EXP", evs=array)
    assert answer["profiles"] == [3]
    profile = h0.profile(3)
    assert profile["ev_mode"] == "EXP" and profile["ev_count"] == 2
    assert [e["ev"] for e in profile["entries"]] == array
    net.data_on_path.clear()
    transfer(net, 0, 3, 2)
    assert set(net.data_on_path) == {(0, 1), (1, 0)}


def test_ev_events_as_the_event_mask_asks(net):
    """A T1 black-holed for 0.3 s: its EVs go ASSUMED_BAD (with the reason), then GOOD
    again once the probes bring them back; a mask without GOOD hears only the first."""
    h0 = Host(net, 0)
    assert h0(cmd="modify_ev_profile", ev_event_mask=["ASSUMED_BAD", "GOOD"])["entries"] == 0
    net.outages.append(Outage(plane=0, spine=1, start=0.02, end=0.3))
    net.send(0, 3, 0, 2_000_000)
    net.run(3.0, lambda: net.all_done([(0, 3, 0)]) and net.now > 1.5)
    events = [m for m in h0.out if m["event"] == "ev_event"]
    bad = [e for e in events if e["state"] == "ASSUMED_BAD"]
    good = [e for e in events if e["state"] == "GOOD"]
    assert bad and {(e["plane"], e["port"], e["dst"], e["profile_id"]) for e in bad} == {
        (0, 1, 3, 3)}
    assert all(e["reason"] in ("gap", "late", "late-in-plane", "timeout", "always-skip")
               for e in bad)
    assert good and {e["reason"] for e in good} == {"probes"}
    assert min(e["t"] for e in good) > 0.3 and {e["drop_count"] for e in events} == {0}
    # Per connection: a mask for dst 3 replaces the host's.
    h0(cmd="modify_ev_profile", dst=3, ev_event_mask=["ASSUMED_BAD"])
    assert h0.profile(3)["ev_event_mask"] == ["ASSUMED_BAD"]
    h0(cmd="modify_ev_profile", dst=3, ev_event_mask=[])
    h0.out.clear()
    h0.ctl.command({"cmd": "modify_ev_profile", "dst": 3, "ev_op": {
        "op": "MODIFY_EV_STATE", "entries": [{"port": 1, "state": "ASSUMED_BAD"}]}}, net.now)
    assert not [m for m in h0.out if m["event"] == "ev_event"]


def test_ev_probes_return_each_paths_round_trip(net, fabric):
    h0 = Host(net, 0)
    paths = catalogue(fabric, 0, 3)
    h0.ctl.command({"cmd": "ep_batch_send_wait", "op_type": "EV_PROBE", "rsp_timeout": 10**8,
                    "req": [{"req_id": i, "dst": 3, "ev": p.ev, "port": p.plane + 1}
                            for i, p in enumerate(paths)]}, net.now)
    net.run(0.2, lambda: any(m["event"] == "ep_batch_send_wait" for m in h0.out))
    (answer,) = [m for m in h0.out if m["event"] == "ep_batch_send_wait"]
    assert answer["errno"] is None and answer["num_rsp"] == len(paths) == 4
    assert sorted(r["req_id"] for r in answer["rsp"]) == [0, 1, 2, 3]
    for rsp in answer["rsp"]:
        # Two links each way, 0.5 ms apiece on the simulated network: 1 ms and a bit.
        assert 1_000_000 <= rsp["rtt"] < 5_000_000 and rsp["adj_svc_time"] == 0
        assert rsp["port"] == paths[rsp["req_id"]].plane + 1
    # A dead path: its probe times out, the others answer; ETIMEDOUT as the header says.
    net.outages.append(Outage(plane=1, spine=0))
    h0.out.clear()
    h0.ctl.command({"cmd": "ep_batch_send_wait", "rsp_timeout": 50_000_000,
                    "req": [{"req_id": 7 + i, "dst": 3, "ev": p.ev}
                            for i, p in enumerate(paths)]}, net.now)
    net.run(net.now + 0.2, lambda: any(m["event"] == "ep_batch_send_wait" for m in h0.out))
    (answer,) = [m for m in h0.out if m["event"] == "ep_batch_send_wait"]
    dead = next(i for i, p in enumerate(paths) if (p.plane, p.spine) == (1, 0))
    assert answer["errno"] == "ETIMEDOUT" and answer["timed_out"] == [7 + dead]
    assert answer["num_rsp"] == 3
    # Nothing of the probes reached a connection: the peer's has none to h0 yet.
    assert 0 not in net.hosts[3].senders and not net.hosts[0].senders


@pytest.mark.parametrize("cmd, errno, text", [
    ({"cmd": "modify_ev_profile", "dst": 3}, "EINVAL", "nothing to modify"),
    ({"cmd": "modify_ev_profile", "ev_event_mask": ["DENIED"]}, "EINVAL",
     "ev_event_mask: a list of GOOD and ASSUMED_BAD"),
    ({"cmd": "modify_ev_profile", "dst": 3, "ev_mode": "GEN"}, "ENOTSUP", "ev_mode 'GEN'"),
    ({"cmd": "modify_ev_profile", "ev_mode": "EXP", "evs": [1]}, "EINVAL", "give dst"),
    ({"cmd": "modify_ev_profile", "ev_op": {"op": "MODIFY_EV_STATE", "entries": [
        {"ev": 1, "state": "DENIED"}]}}, "EINVAL", "an EV names a path of one connection"),
    ({"cmd": "modify_ev_profile", "dst": 3, "ev_op": {"op": "MODIFY_EV_STATE", "entries": [
        {"port": 2, "state": "DENIED"}, {"port": 9, "state": "DENIED"}]}}, "EINVAL",
     r"port 9.*\(1 of 2 entries applied\)"),
    ({"cmd": "modify_ev_profile", "dst": 3, "ev_op": {"op": "MODIFY_EV_STATE", "entries": [
        {"port": 1, "state": "SKIP"}]}}, "EINVAL", "a controller sets GOOD"),
    ({"cmd": "modify_ev_profile", "dst": 3, "ev_op": {"op": "QUERY_EV_ARRAY"}}, "EINVAL",
     "modify takes MODIFY_EV_STATE or REPLACE_EV"),
    ({"cmd": "modify_ev_profile", "dst": 3, "ev_op": {"op": "REPLACE_EV", "entries": [
        {"ev": 5, "ev_new": 6}]}}, "ENOENT", "not in the profile of host 3"),
    ({"cmd": "modify_ev_profile", "dst": 0, "ev_event_mask": []}, "EINVAL", "is this host"),
    ({"cmd": "query_ev_profile", "dst": 9}, "EINVAL", "not a host index"),
    ({"cmd": "ep_batch_send_wait", "op_type": "PORT_STATUS_UPDATE", "req": []}, "ENOTSUP",
     "PORT_STATUS_UPDATE"),
    ({"cmd": "ep_batch_send_wait", "req": [{"req_id": 70000, "dst": 3, "ev": 0}]}, "EINVAL",
     r"req_id: 0 to 65535"),
    ({"cmd": "ep_batch_send_wait", "req": [{"req_id": 1, "dst": 3, "ev": 0, "port": 2}]},
     "EINVAL", r"port 1 \(plane 0\)"),
])
def test_mistakes_are_one_error_line_with_the_headers_errno(net, cmd, errno, text):
    answer = Host(net, 0)(**cmd)
    assert answer["event"] == "error" and answer["errno"] == errno
    assert answer["message"].startswith(cmd["cmd"] + ": ")
    assert re.search(text, answer["message"]), answer["message"]


def test_the_roce_baseline_has_no_ev_profile(fabric):
    net = SimNet(fabric, transport="roce-8@planes")
    h0 = Host(net, 0)
    transfer(net, 0, 3, 0)
    answer = h0(cmd="query_ev_profile", dst=3)
    assert answer["errno"] == "ENOTSUP" and "queue pairs" in answer["message"]
    # EV probes are the endpoint's, whatever the transport.
    h0.ctl.command({"cmd": "ep_batch_send_wait", "req": [{"req_id": 1, "dst": 3,
                                                          "ev": make_ev(1, 0)}]}, net.now)
    net.run(net.now + 0.1, lambda: any(m["event"] == "ep_batch_send_wait" for m in h0.out))
    assert [m["num_rsp"] for m in h0.out if m["event"] == "ep_batch_send_wait"] == [1]


def test_the_agent_hands_control_commands_to_its_control_api(net):
    """hosts/agent.py: the JSON line in, the control API's answer out (the agent's own
    state is not needed: only what its command dispatch touches)."""
    agent = Agent.__new__(Agent)
    out: list[dict] = []
    agent.endpoint, agent.me, agent.fabric, agent.planes = net.hosts[0], 0, net.fabric, 2
    agent.emit = out.append
    agent.command(json.dumps({"cmd": "modify_ev_profile", "ev_event_mask": ["ASSUMED_BAD"]}))
    agent.command(json.dumps({"cmd": "query_ev_profile", "dst": 3}))
    assert [m["event"] for m in out] == ["modify_ev_profile", "error"]
    assert out[1]["errno"] == "ENOENT"
    assert agent.ctl.masks == {None: frozenset({"ASSUMED_BAD"})}
