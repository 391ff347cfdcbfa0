"""The CLI's session (experiments/interactive/session.py) against agents that answer at
once, without a network: a send is a run's phase (experiments/run/workload_run.py) over
the session's mail, a fault is applied and each host's routing told as the runner's
fault player does, and agents started after a fault are told it as a run's agents are
told of the faults in place before its start (delay 0).
"""

from __future__ import annotations

import time
from collections import deque
from types import SimpleNamespace

import pytest

from experiments.interactive import session as session_module
from experiments.interactive.parse import SendRequest, one_switch, parse_link, parse_paths
from experiments.interactive.reports import counter_lines, kernel_counter_lines, path_lines
from experiments.interactive.session import FabricSession
from experiments.run.agents import AgentError
from hosts.protocol import TRANSPORTS
from tests.unit.test_cli_commands import one_line_error


class Agents:
    """An AgentSet's face to the session: what it is told, and answers at once (a
    message of another waiter's first, which the mail keeps for it)."""

    def __init__(self, transport: str = "mrc", qp_error: bool = False):
        self.transport, self.qp_error = transport, qp_error
        self.told: list[tuple[int, dict]] = []
        self.inbox: deque[dict] = deque()

    def command(self, host: int, **cmd) -> None:
        self.told.append((host, cmd))
        now = time.monotonic()
        if cmd["cmd"] == "stats":
            sent = sum(1 for _, c in self.told if c["cmd"] == "send")
            self.inbox.append({"event": "stats", "agent": host, "data_tx": 100 * sent,
                               "qp_errors": int(self.qp_error and sent > 0)})
        elif cmd["cmd"] == "send":
            self.inbox.append({"event": "paths", "agent": host, "peers": {}})
            if self.qp_error:
                self.inbox.append({"event": "qp_error", "agent": host, "dst": cmd["dst"],
                                   "qp": 3, "t": now})
                return
            self.inbox.append({"event": "delivered", "agent": cmd["dst"], "src": host,
                               "msg_id": cmd["msg_id"], "t": now + 0.25, "verified": True})
            self.inbox.append({"event": "completed", "agent": host, "dst": cmd["dst"],
                               "msg_id": cmd["msg_id"], "t": now + 0.5})

    def next(self, deadline: float) -> dict | None:
        return self.inbox.popleft() if self.inbox else None

    def wait_ready(self) -> None:
        pass

    def stop(self) -> None:
        pass


def make_session(fabric, tmp_path, agents: Agents | None = None) -> FabricSession:
    calls: list[tuple] = []
    target = SimpleNamespace(set_link=lambda net, a, b, up: calls.append((a, b, up)))
    session = FabricSession(SimpleNamespace(net=None, fabric=fabric, target=target,
                                            agents=None), tmp_path, TRANSPORTS)
    session.agents, session.links_set = agents, calls
    return session


def test_a_send_is_a_runs_phase_and_leaves_other_mail_alone(fabric, tmp_path):
    agents = Agents()
    session = make_session(fabric, tmp_path, agents)
    lines = session.send((SendRequest(1, 0, 500_000, "mrc"), SendRequest(2, 0, 500_000, "mrc")))
    assert [c["cmd"] for _, c in agents.told] == ["stats", "stats", "send", "send",
                                                  "stats", "stats"]
    assert lines[0].startswith("h1 -> h0 over mrc: 500000 bytes delivered in 0.2")
    assert lines[0].endswith(", verified, all acknowledged after 0.500 s")
    assert lines[1] == "  sender h1: packets sent 200"
    assert lines[2].startswith("h2 -> h0 over mrc: 500000 bytes delivered")
    # The `paths` answers were no send's: kept for whoever asks.
    assert [m["event"] for m in session._mail] == ["paths", "paths"]


def test_a_failed_queue_pair_ends_the_send_at_once(fabric, tmp_path):
    session = make_session(fabric, tmp_path, Agents("roce-8@planes", qp_error=True))
    lines = session.send((SendRequest(0, 3, 1_000_000, "roce-8@planes"),))
    assert lines[0] == "h0 -> h3 over roce-8@planes: 1000000 bytes NOT delivered"
    assert "1 queue pair(s) went to the error state" in lines[2]
    assert lines[3].startswith("  stopped waiting ") and "a queue pair" in lines[3]


def test_an_agents_error_during_a_send_is_one_error(fabric, tmp_path):
    agents = Agents()
    session = make_session(fabric, tmp_path, agents)
    agents.command = lambda host, **cmd: agents.inbox.append(
        {"event": "stats", "agent": host} if cmd["cmd"] == "stats"
        else {"event": "error", "agent": host, "message": "no route"})
    with pytest.raises(AgentError, match="agent h0: no route"):
        session.send((SendRequest(0, 3, 1000, "mrc"),))


def test_a_fault_is_applied_then_told_to_each_hosts_routing(fabric, tmp_path):
    agents = Agents("roce-8@planes")
    session = make_session(fabric, tmp_path, agents)
    assert session.fault(parse_link(fabric, ["down", "p0t0r0", "p0t1s0"])) == \
        "link-flap p0t0r0 p0t1s0 down: done"
    assert session.links_set == [("p0t0r0", "p0t1s0", False)]
    told = {host: cmd["kind"] for host, cmd in agents.told}
    assert told == {0: "local-down", 1: "local-down", 2: "remote-down", 3: "remote-down"}
    assert all("delay_s" not in cmd for _, cmd in agents.told)  # routing's own delays
    session.fault(parse_link(fabric, ["up", "p0t0r0", "p0t1s0"]))
    assert session.faults == {} and session.links_set[-1] == ("p0t0r0", "p0t1s0", True)


def test_agents_started_after_a_fault_are_told_it_at_once(fabric, tmp_path, monkeypatch):
    started: list[Agents] = []

    def agent_set(running, transport, folder, progress_s):
        started.append(Agents(transport))
        return started[-1]

    monkeypatch.setattr(session_module, "AgentSet", agent_set)
    session = make_session(fabric, tmp_path)
    session.agents_for("mrc")
    session.fault(parse_link(fabric, ["down", "p0t1s0", "p0t0r1"]))
    agents = session.agents_for("roce-8@planes")
    assert agents is started[-1] and len(started) == 2
    assert {(host, cmd["kind"], cmd["delay_s"]) for host, cmd in agents.told} == {
        (0, "remote-down", 0.0), (1, "remote-down", 0.0), (2, "local-down", 0.0),
        (3, "local-down", 0.0)}
    # Once it is back, the next agents hear nothing.
    session.fault(parse_link(fabric, ["up", "p0t1s0", "p0t0r1"]))
    assert session.agents_for("mrc").told == []


def test_paths_and_switches_are_read_from_their_arguments(fabric):
    assert parse_paths(fabric, ["h0"]) == (0, [1, 2, 3])
    assert parse_paths(fabric, ["h0", "h3"]) == (0, [3])
    assert "paths: peer: is the host itself" in one_line_error(parse_paths, fabric,
                                                                ["h1", "h1"])
    assert one_switch(fabric, ["p0t1s1"], "tables") == "p0t1s1"
    assert "tables: arguments: expected 1, got 0" in one_line_error(one_switch, fabric, [],
                                                                     "tables")


def test_a_paths_lines_name_the_faults_and_the_ev_states(fabric):
    link = parse_link(fabric, ["down", "p0t0r0", "p0t1s0"]).fault
    evs = [{"plane": 0, "path": 0, "state": "ASSUMED_BAD", "active": False},
           {"plane": 0, "path": 1, "state": "GOOD", "active": True}]
    lines = path_lines(fabric, 0, 3, {link.key(): link}, evs, "EV states of the mrc sender")
    assert lines[0] == "h0 -> h3: 4 paths; EV states of the mrc sender"
    assert lines[1].split() == ["plane", "0", "h0", ">", "p0t0r0", ">", "p0t1s0", ">",
                                "p0t0r1", ">", "h3", "fcbb:bb00:1000:2000:1001:8003::"]
    assert lines[2] == ("      network: link p0t0r0-p0t1s0 down   EVs: none in use; out of "
                        "rotation: 1 ASSUMED_BAD")
    assert lines[4].endswith("network: no fault set   EVs: 1 GOOD")
    assert "EVs" not in path_lines(fabric, 0, 3, {}, None, "no agents running")[2]


def test_counters_show_the_columns_the_data_plane_counts(fabric):
    found = {"p0t1s0-eth0": {"forwarded": 12, "trim_pkts": 2}, "p0t1s0-eth1": {"forwarded": 3}}
    lines = counter_lines(fabric, "p0t1s0", found)
    assert lines[0] == "p0t1s0: show interfaces counters"
    assert lines[1].split() == ["IFACE", "PEER", "FORWARDED", "TRIM_PKTS"]
    assert lines[2].split() == ["p0t1s0-eth0", "p0t0r0", "12", "2"]
    assert counter_lines(fabric, "p0t1s0", found, trim_only=True)[1].split() == [
        "IFACE", "PEER", "TRIM_PKTS"]
    kernel = kernel_counter_lines(fabric, "p0t1s0", {"p0t1s0-eth1": {
        "rx": {"packets": 5, "dropped": 1}, "tx": {"packets": 7}}})
    assert kernel[3].split() == ["p0t1s0-eth1", "p0t0r1", "5", "7", "1", "0"]
