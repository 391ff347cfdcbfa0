"""The paper's workloads through the experiment command on 2tier-2plane (kernel data
plane): two concurrent flows, and an incast beside a victim with hosts of its own;
summary.json has each flow's throughput and the results folder flows.png."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def run_scenario(tmp_path: Path, scenario: dict) -> tuple[dict, Path]:
    path = tmp_path / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    cmd = [sys.executable, "-m", "experiments", "run", "--results", str(tmp_path / "results"),
           "--topo", "2tier-2plane", "--dataplane", "kernel", "--scenario", str(path),
           "--rate-cap", "off"]  # the figures below are for the topology's own rates
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = Path(proc.stdout.strip().splitlines()[-1].removeprefix("results: "))
    return json.loads((folder / "summary.json").read_text()), folder


def flows_of(block: dict) -> dict[tuple[int, int], dict]:
    return {(f["src"], f["dst"]): f for f in block["flow_throughput"]["flows"]}


def test_two_flows_and_an_incast_beside_its_victim(tmp_path):
    summary, folder = run_scenario(tmp_path, {
        "name": "two-flows", "workload": "flows", "transports": ["mrc"], "timeout_s": 60,
        "params": {"flows": [[0, 2], [1, 3]], "message_bytes": 2_000_000}})
    assert summary["ok"], summary
    [block] = summary["transports"]
    flows = flows_of(block)
    assert set(flows) == {(0, 2), (1, 3)}
    for flow in flows.values():
        assert flow["bytes"] == 2_000_000 and flow["role"] == "data"
        # Two planes of 20 Mbit/s: each flow moves at a real rate, and its series adds
        # up to the bytes it delivered (within a bin at each end).
        assert 2 < flow["mean_mbps"] <= 41, flow
        moved = sum(flow["series_mbps"]) * block["flow_throughput"]["series_bin_s"] / 8e-6
        assert abs(moved - 2_000_000) < 0.1 * 2_000_000, flow
    assert [(p["phase"], p["message_bytes"], p["delivered"]) for p in block["phases"]] == [
        (0, 2_000_000, 2)]
    assert (folder / "flows.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    summary, folder = run_scenario(tmp_path, {
        "name": "incast-victim", "workload": "incast", "transports": ["mrc"],
        "timeout_s": 60, "params": {"receiver": 0, "victim": [3, 1],
                                    "message_bytes": 1_000_000, "victim_bytes": 3_000_000}})
    assert summary["ok"], summary
    [block] = summary["transports"]
    flows = flows_of(block)
    assert set(flows) == {(2, 0), (3, 1)} and flows[(3, 1)]["role"] == "victim"
    victim = block["victim_throughput"]
    assert (victim["src"], victim["dst"]) == (3, 1)
    assert victim["during_incast_mbps"] > 2 and victim["after_incast_mbps"] > 2, victim
    assert (folder / "flows.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
