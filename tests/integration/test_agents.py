"""Host agents on the kernel data plane: real transfers under faults, and garbage."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

from experiments.analysis.metrics import read_events
from experiments.dataplanes.targets import apply_fault
from experiments.faults import parse_faults
from experiments.run.agents import AgentSet
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from hosts import wire
from hosts.protocol import MRC_HEADER_BYTES
from topologies.addressing import host_address
from topologies.paths import catalogue

REPO = Path(__file__).resolve().parents[2]


def transfer(network, tmp_path, faults, transport="mrc", size=4_000_000):
    fabric = network.fabric
    actions = parse_faults(faults, fabric)
    plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": size}, fabric)
    run = run_transport(network, transport, plan, actions,
                        lambda a: apply_fault(network, a), tmp_path, 60.0, {}, print)
    return run, read_events(run.event_files)


def test_multi_megabyte_transfer_survives_a_flapping_link(kernel_network, tmp_path):
    run, events = transfer(kernel_network, tmp_path, [
        {"kind": "link-flap", "link": ["p0t0r0", "p0t1s0"], "at_s": 0.1, "down_s": 0.3,
         "count": 3, "every_s": 0.5}])
    (result,) = run.transfers
    assert result.done and result.verified, result
    assert [f["up"] for f in run.faults][:2] == [False, True]
    retired = [e for e in events if e["event"] == "retire"]
    # The flapping link is on plane 0, spine 0: that path goes first, within the flap.
    assert retired and (retired[0]["plane"], retired[0]["path"]) == (0, 0)
    assert 0.1 <= retired[0]["t"] - run.start <= 0.4


def test_transfer_completes_on_the_remaining_planes_when_a_port_is_down(kernel_network,
                                                                      tmp_path):
    run, events = transfer(kernel_network, tmp_path, [
        {"kind": "nic-port-down", "host": "h3", "plane": 1, "at_s": 0.1}])
    (result,) = run.transfers
    assert result.done and result.verified
    assert any(e["event"] == "local-plane-down" and e["host"] == 3 for e in events)
    # The sender heard about it (plane status / port state) and stopped using plane 1.
    down = [e for e in events if e["event"] == "plane-down" and e["host"] == 0]
    assert down and down[0]["plane"] == 1


def test_one_process_serves_several_hosts_each_in_its_own_namespace(kernel_network,
                                                                     tmp_path):
    """Two agent processes serve the four hosts (hosts/agent.py `serve`): every pair
    moves a verified message, and each host's sockets are in that host's namespace,
    held by the process serving it, bound to the host's own address."""
    net, fabric = kernel_network.net, kernel_network.fabric
    plan = phases("all-to-all", {"message_bytes": 300_000}, fabric)
    agents = AgentSet(kernel_network, "mrc", tmp_path / "agents", processes=2)
    try:
        agents.wait_ready()
        pids = {h: proc.pid for h, proc in agents.procs.items()}
        assert len(set(pids.values())) == 2 and pids[0] == pids[2] != pids[1] == pids[3]
        for host in fabric.hosts:
            listed = net.get(host.name).cmd("ss -u -a -n -p -H")
            owned = [line for line in listed.splitlines() if f"pid={pids[host.index]}," in line]
            address = host_address(host.index)
            assert len(owned) == fabric.spec.planes, listed
            assert all(f"[{address}]" in line for line in owned), listed
        for t in (t for phase in plan for t in phase):
            agents.command(t.src, cmd="send", dst=t.dst, msg_id=t.msg_id, bytes=t.size)
        delivered, deadline = set(), time.monotonic() + 60
        while len(delivered) < sum(map(len, plan)):
            message = agents.next(deadline)
            assert message is not None, f"delivered only {sorted(delivered)}"
            assert message["event"] != "error", message
            if message["event"] == "delivered":
                assert message["verified"], message
                delivered.add((message["src"], message["agent"]))
        assert delivered == {(t.src, t.dst) for phase in plan for t in phase}
        stats = agents.stats()
        assert all(stats[h.index]["process_hosts"] == 2 for h in fabric.hosts)
    finally:
        agents.stop()
    assert all(proc.poll() is not None for proc in agents.procs.values())


def malformed(rng: random.Random) -> bytes:
    """A datagram that is certainly not a well-formed MRC packet."""
    good = wire.encode_data(0, 0, 1, 0, 0, 0, 0, 100, bytes(50))
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, MRC_HEADER_BYTES))  # truncated header
    if kind == 1:
        return bytes([rng.choice([0x01, 0x21, 0xF1, 0x02])]) + good[1:]  # wrong version
    if kind == 2:
        return bytes([0x10 | rng.choice([0, 7, 8, 15])]) + good[1:]  # unknown type
    if kind == 3:
        return good[:-rng.randrange(1, 50)]  # payload shorter than payload_len
    if kind == 4:
        # A DATA header alone, as a trimmed packet looks, but not in a trimmed class: a
        # short frame is not trimming.
        return good[:MRC_HEADER_BYTES] + rng.randbytes(rng.randrange(0, 20))
    return bytes([0x12]) + good[1:33 + rng.randrange(0, 20)]  # control body of wrong size


def test_fuzz_10000_malformed_packets_are_counted_not_fatal(kernel_network, tmp_path):
    net, fabric = kernel_network.net, kernel_network.fabric
    agents = AgentSet(kernel_network, "mrc", tmp_path / "agents")
    try:
        agents.wait_ready()
        address = catalogue(fabric, 0, 3)[0].address
        fuzzer = net.get("h0").popen(
            [sys.executable, "-c", FUZZER, address, "10000"], cwd=str(REPO),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = fuzzer.communicate(timeout=120)
        assert fuzzer.returncode == 0, err
        assert json.loads(out)["sent"] == 10_000
        deadline = time.monotonic() + 10
        while True:
            stats = agents.stats()[3]
            if stats["garbage"] >= 10_000 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert stats["garbage"] == 10_000 and stats["rx_datagrams"] == 10_000
        assert agents.procs[3].poll() is None  # still running
    finally:
        agents.stop()


# Run with the repository as the working directory, so `tests` and `hosts` import.
FUZZER = """
import json, random, socket, sys, time
from hosts.protocol import MRC_UDP_PORT, UDP_NO_CHECK6_TX
from tests.integration.test_agents import malformed
address, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)
s.bind(('fcbb:bb00:8000::', 0))
for i in range(count):
    s.sendto(malformed(rng), (address, MRC_UDP_PORT))
    if i % 20 == 19:
        time.sleep(0.002)  # stay below the emulated link's queue
print(json.dumps({"sent": count}))
"""
