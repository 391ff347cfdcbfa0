"""Pure parts of the runner: data-plane choice, tc commands, scenarios, sizing, CLI errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.dataplanes import choice as dataplane
from experiments.scenarios.scenario import ScenarioError, load_scenario
from hosts.protocol import DATA_FRAME_BYTES, NIC_MTU_PAYLOAD, data_frame_bytes
from topologies import size
from topologies.bmv2 import queue_commands
from topologies.model import LinkParams, load_topology
from topologies.shaping import ShapingFeatures, tc_commands

REPO = Path(__file__).resolve().parents[2]


def test_dataplane_auto_prefers_bmv2(monkeypatch):
    monkeypatch.setattr(dataplane, "missing_bmv2_tools", lambda: [])
    assert dataplane.choose("auto", "6.1.0")[0] == "bmv2"


def test_dataplane_auto_falls_back_to_kernel(monkeypatch):
    monkeypatch.setattr(dataplane, "missing_bmv2_tools", lambda: ["simple_switch_grpc"])
    name, reason = dataplane.choose("auto", "6.8.0-45-generic")
    assert name == "kernel" and "simple_switch_grpc not found" in reason


def test_dataplane_errors_are_one_line(monkeypatch):
    monkeypatch.setattr(dataplane, "missing_bmv2_tools", lambda: ["p4c-bm2-ss"])
    with pytest.raises(dataplane.DataplaneError, match="DATAPLANE=bmv2: p4c-bm2-ss not found"):
        dataplane.choose("bmv2")
    with pytest.raises(dataplane.DataplaneError, match="needs Linux >= 6.1"):
        dataplane.choose("kernel", "5.15.0-91-generic")
    with pytest.raises(dataplane.DataplaneError, match="unknown data plane"):
        dataplane.choose("ovs")


def test_tc_commands_full_and_minimal_kernels():
    params = LinkParams(rate_mbit=10, delay_ms=0.5, queue_pkts=64)
    full = tc_commands("x-eth0", params, 16, ShapingFeatures(netem=True, red=True),
                       DATA_FRAME_BYTES)
    assert "red limit 745344 min 20704 max 21998" in full[2] and full[2].endswith("ecn")
    assert full[3].endswith("netem delay 0.5ms limit 64")
    minimal = tc_commands("x-eth0", params, 16, ShapingFeatures(netem=False, red=False),
                      DATA_FRAME_BYTES)
    assert minimal[-1] == "tc qdisc replace dev x-eth0 parent 1:1 handle 10: pfifo limit 64"
    assert not any("red" in c for c in tc_commands("x-eth0", params, None,
                                                    ShapingFeatures(True, True), DATA_FRAME_BYTES))
    # A jumbo frame: htb's quantum covers it, RED counts its bytes.
    jumbo = tc_commands("x-eth0", params, 16, ShapingFeatures(netem=True, red=True),
                        data_frame_bytes(NIC_MTU_PAYLOAD))
    assert jumbo[1].endswith("quantum 4190")
    assert "min 67040 max 71230 avpkt 4190" in jumbo[2]


def test_bmv2_queues_follow_the_link_rate_in_frames_and_headers():
    # 10 Mbit/s: 966 full 1294-byte frames a second in the data queue (0) and in the
    # lossless queue (3), 16 times deeper than the data queue's 64; the lossless class's
    # short frames (RoCE acks, queue 4) at the rate of 118-byte frames, as deep; the
    # priority queue (7) of trimmed headers and acks at the rate of 94-byte frames, with
    # the same bytes: 64 frames of 1294 bytes hold 881 headers. BMv2's buffers are twice
    # the program's limits, so the program decides the drops.
    assert queue_commands(3, 10, 64) == [
        "set_queue_rate 966 3 0", "set_queue_depth 128 3 0",
        "set_queue_rate 966 3 3", "set_queue_depth 1024 3 3",
        "set_queue_rate 10593 3 4", "set_queue_depth 1024 3 4",
        "set_queue_rate 13298 3 7", "set_queue_depth 1762 3 7"]
    # A bigger trim size: fewer, longer headers; a capped priority share: fewer a second.
    assert queue_commands(3, 10, 64, trim_size_bytes=100)[-2:] == [
        "set_queue_rate 12500 3 7", "set_queue_depth 1656 3 7"]
    assert queue_commands(3, 10, 64, priority_share=0.5)[-2] == "set_queue_rate 6649 3 7"
    emulation = ShapingFeatures(netem=False, red=False)
    assert len(emulation.missing()) == 2 and len(emulation.missing(red_needed=False)) == 1


def test_scenarios():
    fabric = load_topology("2tier-2plane")
    assert load_scenario("pathcheck", fabric).workload == "pathcheck"
    with pytest.raises(ScenarioError, match="no such scenario file; fix: use one of: "):
        load_scenario("nope", fabric)


def test_sizing_matches_the_mrc_numbers():
    multi = size.multiplane(512, 8, 100)
    assert multi.hosts == 131_072
    assert multi.switches_per_tier == (8 * 512, 8 * 256)
    single = size.single_plane(512, 8, 100, multi.hosts)
    assert (single.radix, single.tiers) == (64, 4)
    assert size.max_hosts(64, 3) == 65_536  # three tiers of 64-port switches are not enough
    assert single.switches > multi.switches


def test_size_cli():
    out = subprocess.run([sys.executable, "-m", "topologies.size", "--radix", "512",
                          "--planes", "8"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0 and "131,072" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "topologies.size", "--radix", "500",
                          "--planes", "8"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_scenario_with_an_unknown_protocol_setting_is_rejected_before_running(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("workload: transfer\nprotocol: {windw: 4}\n")
    proc = subprocess.run([sys.executable, "-m", "experiments", "run", "--topo", "2tier-2plane",
                           "--scenario", str(scenario)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {scenario}: protocol.windw: unknown setting")


def test_run_rejects_bad_dataplane_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "experiments", "run", "--topo", "2tier-2plane",
                           "--dataplane", "ovs"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: DATAPLANE=ovs: unknown data plane; fix: use auto, kernel or bmv2"]


@pytest.mark.parametrize("cap", [None, 2.5, 0.43])
def test_agents_work_on_the_fabric_the_run_built_at_its_capped_rate(tmp_path, cap):
    from experiments.run.agents import agent_config
    from hosts.agent import AgentConfig
    from hosts.config import ProtocolConfig
    from hosts.endpoint import link_adjusted
    from topologies.model import with_rate_cap
    from topologies.resolved import write_resolved_topology

    topology = load_topology("2tier-8plane")
    built = topology if cap is None else with_rate_cap(topology, cap)
    write_resolved_topology(tmp_path / "topology.json", built, "kernel")
    config = agent_config(tmp_path / "topology.json", 3, "mrc", tmp_path / "events.jsonl",
                          None, 0.05)
    fabric = AgentConfig(**json.loads(json.dumps(config))).fabric()
    assert fabric.spec.host_t0 == built.spec.host_t0 and fabric.spec.t0_t1 == built.spec.t0_t1
    assert fabric.spec.host_t0.rate_mbit == (10.0 if cap is None else cap)
    # ... so that its timers are those of the links it has, not of the topology file's.
    assert link_adjusted(ProtocolConfig(), fabric) == link_adjusted(ProtocolConfig(), built)
