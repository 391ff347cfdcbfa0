"""A late packet is not a lost one (hosts/sender.py `_late`): make paper's fault rows'
workload, cross-T1 flows in both directions on 2tier-8plane, played without faults on
the kernel data plane at 1.25 Mbit/s a link (this 2-core machine's calibrated budget),
retires no path. An emulated hop with nothing queued forwards at once, so a path's
round trip there goes from a millisecond to tens when a few frames queue ahead; when
lateness alone retired, these flows retired 459-588 EVs a run with nothing lost. Now
every late packet's path is held and probed, and every probe is answered (but for one
sent as the transfer ends, whose agent exits first).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from experiments.paper.rows import rows
from topologies.model import load_topology

REPO = Path(__file__).resolve().parents[2]


def test_fault_free_cross_t1_flows_retire_no_path(tmp_path):
    row = next(r for r in rows(load_topology("2tier-8plane")) if r.key == "t0-t1-link-flaps-loaded")
    scenario = {**row.scenario, "name": "cross-t1-flows", "transports": ["mrc"], "faults": []}
    path = tmp_path / "cross-t1-flows.yaml"
    path.write_text(yaml.safe_dump(scenario))
    cmd = [sys.executable, "-m", "experiments", "run", "--results", str(tmp_path / "runs"),
           "--topo", "2tier-8plane", "--dataplane", "kernel", "--scenario", str(path),
           "--rate-cap", "1.25"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = Path(proc.stdout.strip().splitlines()[-1].removeprefix("results: "))
    (block,) = json.loads((folder / "summary.json").read_text())["transports"]
    assert block["ok"] and block["verified"], block
    events = [json.loads(line) for line in (folder / "events.jsonl").open()]
    retired = [e for e in events if e["event"] == "retire"]
    assert not retired, retired[:5]
    exited = {e["host"]: e["t"] for e in events if e["event"] == "exit"}
    # The test means something only if packets were late: their paths were held.
    held = sum(e["event"] == "suspect" for e in events)
    assert held > 0
    # Every held path is cleared by its probe's answer, but for one held in the last
    # moments of the transfer: its agent exits before the answer is back.
    assert all(e["t"] > exited[e["host"]] - VERDICT_PENDING_S for e in unanswered(events)), \
        [(e, exited[e["host"]]) for e in unanswered(events)]


# A held path's verdict is due within its round trip plus the larger of 4 RTT
# variations and path_skew_s (hosts/loss_detection.py `_late`): tens of milliseconds at
# 1.25 Mbit/s. One still held a second before its agent exits had no verdict at all.
VERDICT_PENDING_S = 1.0


def unanswered(events: list[dict]) -> list[dict]:
    """The `suspect` events no `suspect-cleared` of the same host, peer and path
    followed."""
    open_ = {}
    for e in events:
        key = (e.get("host"), e.get("peer"), e.get("plane"), e.get("path"))
        if e["event"] == "suspect":
            open_[key] = e
        elif e["event"] == "suspect-cleared":
            open_.pop(key, None)
    return list(open_.values())
