"""One agent process serving several hosts (hosts/agent.py `serve`): two real agents on
the loopback (bench/agent_loopback.py's harness) in one event loop, driven over one
control channel whose lines name their host, move verified messages both ways; every
line out names its host, a line for no host it serves is an error, and the loop ends
when every agent has been told to quit."""

from __future__ import annotations

import io
import json
import os
import threading
import time

import pytest

from bench.agent_loopback import LoopbackAgent, loopback_fabric
from hosts.agent import AgentConfig, serve
from topologies.resolved import write_resolved_topology

BASE = 47600  # ports of its own: the loopback bench uses 47000 and up


@pytest.fixture
def two_agents(tmp_path):
    topology = tmp_path / "topology.json"
    write_resolved_topology(topology, loopback_fabric(planes=2, rate_mbit=200))
    agents = [LoopbackAgent(AgentConfig(host=h, topology=str(topology), transport="mrc",
                                        events=str(tmp_path / f"h{h}.jsonl")), base=BASE)
              for h in (0, 1)]
    yield agents, tmp_path


def test_one_loop_serves_two_hosts_over_one_control_channel(two_agents, monkeypatch):
    agents, folder = two_agents
    read, write = os.pipe()
    control = os.fdopen(read, "rb", buffering=0)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    loop = threading.Thread(target=serve, args=(agents, control), daemon=True)
    loop.start()

    def tell(**cmd) -> None:
        os.write(write, (json.dumps(cmd) + "\n").encode())

    def lines() -> list[dict]:
        return [json.loads(line) for line in out.getvalue().splitlines()]

    def wait_for(predicate, timeout_s: float = 20.0) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate(lines()):
                return lines()
            time.sleep(0.02)
        raise AssertionError(f"not seen in {timeout_s}s: {lines()}")

    wait_for(lambda seen: sum(e["event"] == "ready" for e in seen) == 2)
    tell(host=0, cmd="send", dst=1, msg_id=0, bytes=300_000)
    tell(host=1, cmd="send", dst=0, msg_id=0, bytes=200_000)
    tell(host=7, cmd="stats")  # no such host here: an error, the loop goes on
    seen = wait_for(lambda seen: sum(e["event"] == "delivered" for e in seen) == 2)
    delivered = {(e["agent"], e["src"], e["bytes"], e["verified"])
                 for e in seen if e["event"] == "delivered"}
    assert delivered == {(1, 0, 300_000, True), (0, 1, 200_000, True)}
    assert all("agent" in e for e in seen)
    assert any('"host": 7' in e["message"] for e in seen if e["event"] == "error"), seen
    tell(host=0, cmd="stats")
    stats = wait_for(lambda seen: any(e["event"] == "stats" for e in seen))
    (mine,) = [e for e in stats if e["event"] == "stats"]
    assert mine["agent"] == 0 and mine["process_hosts"] == 2
    # One told to quit: the loop serves the other still; both told: it ends.
    tell(host=0, cmd="quit")
    time.sleep(0.2)
    assert loop.is_alive()
    tell(host=1, cmd="quit")
    loop.join(timeout=5)
    assert not loop.is_alive()
    os.close(write)
    # Each agent wrote its own event log, ending with its exit record.
    for h in (0, 1):
        events = [json.loads(line) for line in (folder / f"h{h}.jsonl").read_text()
                  .splitlines()]
        assert events[-1]["event"] == "exit" and events[-1]["host"] == h
