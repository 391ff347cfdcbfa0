"""The control API (hosts/mrc_ctl.py, OCP MRC's mrc_ctl.h) end to end on a running fabric:
each call made to a real agent over its control channel, its effect seen in the
packets: a denied EV carries nothing until it is GOOD again (the agent's per-path
counters and per-EV send times), EV probes come back with round trips, EV events
report a failed path and its return, and a `deny` step of a scenario keeps a plane
unused in a run (the CLI's `evs` and `ev` commands: test_cli.py, which brings up a
fabric of its own).
"""

from __future__ import annotations

import time

from experiments.analysis.metrics import read_events
from experiments.dataplanes.targets import apply_fault
from experiments.faults import parse_faults
from experiments.run.agents import AgentSet
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from hosts.protocol import EV_CHOICE_MASK, ev_choice, make_ev
from topologies.paths import catalogue

ANSWER_S = 10.0


def ask(agents: AgentSet, host: int, event: str, **cmd) -> dict:
    """Send a command to one agent and wait for its answer (an error fails the test)."""
    agents.command(host, **cmd)
    deadline = time.monotonic() + ANSWER_S
    while True:
        message = agents.next(deadline)
        assert message is not None, f"h{host} did not answer {cmd}"
        if message["agent"] == host and message["event"] in (event, "error", "exited"):
            assert message["event"] == event, message
            return message


def transfer(agents: AgentSet, src: int, dst: int, msg_id: int, size: int,
             seen: list[dict] | None = None) -> None:
    """One message, delivered, verified and acknowledged; other messages go to `seen`."""
    agents.command(src, cmd="send", dst=dst, msg_id=msg_id, bytes=size)
    waiting = {("delivered", dst), ("completed", src)}
    deadline = time.monotonic() + 60
    while waiting:
        message = agents.next(deadline)
        assert message is not None, f"message {msg_id} h{src} -> h{dst} did not finish"
        key = (message["event"], message["agent"])
        if key in waiting and message.get("msg_id") == msg_id:
            if message["event"] == "delivered":
                assert message["verified"], message
            waiting.discard(key)
        elif message["event"] in ("error", "exited"):
            raise AssertionError(message)
        elif seen is not None:
            seen.append(message)


def profile(agents: AgentSet, src: int, dst: int) -> dict:
    answer = ask(agents, src, "query_ev_profile", cmd="query_ev_profile", dst=dst)
    (found,) = answer["profiles"]
    return found


def path_tx(found: dict) -> dict[tuple[int, int], int]:
    return {(e["plane"], e["path"]): e["path_tx"] for e in found["entries"]}


def test_a_denied_ev_carries_nothing_until_it_is_good_again(kernel_network, tmp_path):
    agents = AgentSet(kernel_network, "mrc", tmp_path / "agents")
    try:
        agents.wait_ready()
        transfer(agents, 0, 3, 0, 500_000)
        before = profile(agents, 0, 3)
        assert before["profile_id"] == 3 and before["ev_mode"] == "GEN"
        victim = next(e for e in before["entries"] if e["active"] and e["plane"] == 0)
        key = (victim["plane"], victim["path"])
        denied_at = time.monotonic()
        ask(agents, 0, "modify_ev_profile", cmd="modify_ev_profile", dst=3, ev_op={
            "op": "MODIFY_EV_STATE", "entries": [{"ev": victim["ev"], "state": "DENIED"}]})
        denied = profile(agents, 0, 3)
        on_path = [e for e in denied["entries"] if (e["plane"], e["path"]) == key]
        assert on_path and {e["state"] for e in on_path} == {"DENIED"}
        assert not any(e["active"] for e in on_path)

        transfer(agents, 0, 3, 1, 2_000_000)
        during = profile(agents, 0, 3)
        tx = path_tx(during)
        # Not one packet on the denied path: its counter stands still, and no EV of it
        # was sent on since the denial.
        assert tx[key] == path_tx(denied)[key]
        assert all(e["last_sent"] is None or e["last_sent"] < denied_at
                   for e in during["entries"] if (e["plane"], e["path"]) == key)
        assert sum(tx.values()) > sum(path_tx(denied).values())

        ask(agents, 0, "modify_ev_profile", cmd="modify_ev_profile", dst=3, ev_op={
            "op": "MODIFY_EV_STATE", "entries": [{"ev": victim["ev"], "state": "GOOD"}]})
        transfer(agents, 0, 3, 2, 2_000_000)
        after = profile(agents, 0, 3)
        assert path_tx(after)[key] > tx[key]
        assert {e["state"] for e in after["entries"] if (e["plane"], e["path"]) == key} == {
            "GOOD"}

        # REPLACE_EV, then QUERY_EV_STATE of the old and the new EV.
        old = next(e for e in after["entries"] if e["active"])
        # The same plane; a choice two higher names the same of its two paths.
        new = make_ev(old["plane"], (ev_choice(old["ev"]) + 2) & EV_CHOICE_MASK)
        ask(agents, 0, "modify_ev_profile", cmd="modify_ev_profile", dst=3, ev_op={
            "op": "REPLACE_EV", "entries": [{"ev": old["ev"], "ev_new": new, "state": "GOOD"}]})
        states = ask(agents, 0, "query_ev_profile", cmd="query_ev_profile", dst=3, ev_op={
            "op": "QUERY_EV_STATE", "entries": [{"ev": old["ev"]}, {"ev": new}]})
        assert [e["state"] for e in states["profiles"][0]["entries"]] == ["UNKNOWN", "GOOD"]
    finally:
        agents.stop()


def test_an_explicit_array_and_ev_probes(kernel_network, tmp_path):
    fabric = kernel_network.fabric
    agents = AgentSet(kernel_network, "mrc", tmp_path / "agents")
    try:
        agents.wait_ready()
        paths = catalogue(fabric, 0, 3)
        answer = ask(agents, 0, "ep_batch_send_wait", cmd="ep_batch_send_wait",
                     op_type="EV_PROBE", rsp_timeout=2_000_000_000,
                     req=[{"req_id": i, "dst": 3, "ev": p.ev} for i, p in enumerate(paths)])
        assert answer["errno"] is None and answer["num_rsp"] == len(paths)
        for rsp in answer["rsp"]:
            assert 0 < rsp["rtt"] < 1_000_000_000
            assert rsp["port"] == paths[rsp["req_id"]].plane + 1
        # One path per plane, by an explicit array: the others carry nothing.
        array = [p.ev for p in paths if p.spine == 1]
        ask(agents, 0, "modify_ev_profile", cmd="modify_ev_profile", dst=3, ev_mode="EXP",
            evs=array)
        transfer(agents, 0, 3, 0, 1_000_000)
        found = profile(agents, 0, 3)
        assert found["ev_mode"] == "EXP" and found["ev_count"] == len(array)
        assert [e["ev"] for e in found["entries"]] == array
        assert all(e["path_tx"] > 0 for e in found["entries"])
        # A probe of a path whose T1 drops everything times out, as the header says.
        step = parse_faults([{"kind": "link-flap", "link": ["p1t0r1", "p1t1s0"], "at_s": 0,
                              "down_s": 1}], fabric)
        apply_fault(kernel_network, step[0])
        try:
            answer = ask(agents, 0, "ep_batch_send_wait", cmd="ep_batch_send_wait",
                         rsp_timeout=300_000_000,
                         req=[{"req_id": 10 + i, "dst": 3, "ev": p.ev}
                              for i, p in enumerate(paths)])
        finally:
            apply_fault(kernel_network, step[1])
        dead = [10 + i for i, p in enumerate(paths) if (p.plane, p.spine) == (1, 0)]
        assert answer["errno"] == "ETIMEDOUT" and answer["timed_out"] == dead
    finally:
        agents.stop()


def test_ev_events_report_a_failed_path_and_its_return(kernel_network, tmp_path):
    fabric = kernel_network.fabric
    agents = AgentSet(kernel_network, "mrc", tmp_path / "agents")
    seen: list[dict] = []
    try:
        agents.wait_ready()
        ask(agents, 0, "modify_ev_profile", cmd="modify_ev_profile",
            ev_event_mask=["ASSUMED_BAD", "GOOD"])
        transfer(agents, 0, 3, 0, 200_000, seen)
        down, up = parse_faults([{"kind": "link-flap", "link": ["p0t0r0", "p0t1s0"],
                                  "at_s": 0, "down_s": 0.5}], fabric)
        apply_fault(kernel_network, down)
        try:
            transfer(agents, 0, 3, 1, 2_000_000, seen)
        finally:
            apply_fault(kernel_network, up)
        healed = time.monotonic()
        # Keep the connection busy while its probes bring the path back.
        deadline = healed + 8
        msg_id = 2
        while time.monotonic() < deadline and not any(
                m["event"] == "ev_event" and m["state"] == "GOOD" for m in seen):
            transfer(agents, 0, 3, msg_id, 200_000, seen)
            msg_id += 1
        while (message := agents.next(time.monotonic() + 0.5)) is not None:
            seen.append(message)
        events = [m for m in seen if m["event"] == "ev_event" and m["agent"] == 0]
        bad = [e for e in events if e["state"] == "ASSUMED_BAD"]
        good = [e for e in events if e["state"] == "GOOD"]
        assert bad and {(e["port"], e["dst"], e["profile_id"]) for e in bad} == {(1, 3, 3)}
        assert {e["reason"] for e in bad} <= {"gap", "late", "late-in-plane", "timeout",
                                              "always-skip"}
        assert good and {e["reason"] for e in good} == {"probes"}
        assert min(e["t"] for e in good) > min(e["t"] for e in bad)
    finally:
        agents.stop()


def test_a_deny_step_keeps_a_plane_of_h0_unused_in_a_run(kernel_network, tmp_path):
    """A scenario's `deny` (Clustermapper's "deny plane 1 of h0"), played by the fault
    injector through the running agents: after the denial, no DATA of h0 takes plane 1
    (per-packet events), and the transfer completes on plane 0."""
    fabric = kernel_network.fabric
    steps = parse_faults([{"kind": "deny", "host": "h0", "plane": 1, "at_s": 0.05}], fabric)
    plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": 3_000_000}, fabric)
    run = run_transport(kernel_network, "mrc", plan, steps,
                        lambda s: apply_fault(kernel_network, s),
                        tmp_path, 60.0, {"packet_events": True}, print)
    (result,) = run.transfers
    assert run.ok and result.done and result.verified, run
    assert [f["fault"] for f in run.faults] == ["deny"] and not run.fault_errors
    events = [e for e in read_events(run.event_files) if e.get("host") == 0]
    denials = [e for e in events if e["event"] == "deny"]
    assert denials and {(e["plane"], e["peer"]) for e in denials} == {(1, 3)}
    denied_at = max(e["t"] for e in denials)
    sends = [e for e in events if e["event"] == "send" and e["t"] > denied_at]
    assert sends and {e["plane"] for e in sends} == {0}
