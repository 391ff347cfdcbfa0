"""The experiment command end to end: results, any valid topology, interruptions, leftovers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from experiments.run.cleanup import cleanup, find_leftovers
from topologies.resolved import read_resolved_topology

REPO = Path(__file__).resolve().parents[2]


def run_cli(tmp_path, *args, timeout=300):
    # "cached": the machine's measured budget if there is one, else the default; a
    # test never calibrates (a minute, and measured while the suite runs).
    cmd = [sys.executable, "-m", "experiments", "run", "--results", str(tmp_path),
           "--rate-cap", "cached", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_run_on_a_3_plane_3_rack_3_t1_topology(tmp_path):
    topo = tmp_path / "three.yaml"
    topo.write_text(yaml.safe_dump({
        "name": "three", "planes": 3, "racks": 3, "hosts_per_rack": 1, "t1_per_plane": 3,
        "links": {"host_t0": {"rate_mbit": 20, "delay_ms": 0.5, "queue_pkts": 64},
                  "t0_t1": {"rate_mbit": 20, "delay_ms": 0.5, "queue_pkts": 64}},
        "ecn_threshold_pkts": 16,
    }))
    proc = run_cli(tmp_path, "--topo", str(topo), "--dataplane", "kernel")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("results: ")
    summary = json.loads((Path(last[len("results: "):]) / "summary.json").read_text())
    assert summary["dataplane"] == "kernel" and summary["ok"] is True
    assert summary["paths_checked"] == summary["paths_ok"] == 3 * 2 * 3 * 3
    assert (summary["hosts"], summary["switches"], summary["links"]) == (3, 18, 9 + 27)
    assert summary["bringup_s"] > 0 and summary["table_writes"] > 0
    resolved = read_resolved_topology(Path(last[len("results: "):]) / "topology.json")
    assert (resolved.name, resolved.dataplane, len(resolved.nodes)) == ("three", "kernel", 21)
    assert not find_leftovers()


def test_a_scenario_with_faults_is_played_again_without_them(tmp_path):
    scenario = tmp_path / "flap.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "flap", "workload": "transfer",
        "params": {"src": 0, "dst": 3, "message_bytes": 600_000},
        "transports": ["mrc", "roce"], "timeout_s": 30,
        "faults": [{"kind": "link-flap", "link": ["p0t0r0", "p0t1s0"], "at_s": 0.02,
                    "down_s": 0.04}],
    }))
    proc = run_cli(tmp_path, "--topo", "2tier-2plane", "--dataplane", "kernel",
                   "--scenario", str(scenario))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = Path(proc.stdout.strip().splitlines()[-1][len("results: "):])
    summary = json.loads((folder / "summary.json").read_text())
    assert [b["transport"] for b in summary["fault_free"]] == ["mrc", "roce"]
    assert all(b["ok"] and b["faults_applied"] == 0 for b in summary["fault_free"])
    assert all(b["faults_applied"] == 2 for b in summary["transports"])
    for entry, faulty, clean in zip(summary["slowdown"], summary["transports"],
                                    summary["fault_free"]):
        assert entry["faulty_s"] == faulty["workload_s"] and entry["clean_s"] == clean["workload_s"]
    assert (folder / "fault-free" / "agents").is_dir()
    assert "## Against each transport's own fault-free run" in (folder / "report.md").read_text()
    assert "fault-free: mrc:" in proc.stdout
    assert not find_leftovers()


def test_a_dilated_run_keeps_its_bytes_and_plays_its_faults_later(tmp_path):
    scenario = tmp_path / "flap.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "flap", "workload": "transfer",
        "params": {"src": 0, "dst": 3, "message_bytes": 2_000_000},
        "transports": ["mrc"], "timeout_s": 30,
        "faults": [{"kind": "link-down", "link": ["p0t0r0", "p0t1s0"], "at_s": 0.05,
                    "down_s": 0.1}],
    }))
    # 2tier-2plane's links run at 20 Mbit/s: at 5 the scenario's clock runs 4 times slower.
    proc = run_cli(tmp_path, "--topo", "2tier-2plane", "--dataplane", "kernel",
                   "--scenario", str(scenario), "--rate-cap", "5", "--time", "dilate",
                   "--no-fault-free")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "time dilated 4x" in proc.stdout
    folder = Path(proc.stdout.strip().splitlines()[-1][len("results: "):])
    summary = json.loads((folder / "summary.json").read_text())
    workload = summary["workload"]
    assert (workload["time_dilation"], workload["data_scale"], workload["bytes"]) == \
        (4.0, 1.0, 2_000_000)
    (block,) = summary["transports"]
    assert block["ok"] and block["verified"] and block["bytes_delivered"] == 2_000_000
    down, up = sorted(summary["faults"], key=lambda f: f["t"])
    assert not down["up"] and up["up"]
    assert 0.2 <= down["t"] < 0.3  # at 4 x 0.05 s
    assert 0.38 <= up["t"] - down["t"] < 0.5  # down for 4 x 0.1 s
    assert "Time dilated 4x" in (folder / "report.md").read_text()
    assert not find_leftovers()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path, *args):
    cmd = [sys.executable, "-m", "experiments", "run", "--results", str(tmp_path),
           "--topo", "2tier-2plane", "--dataplane", "kernel", "--rate-cap", "cached", *args]
    # A shell without job control starts a background command with SIGINT ignored, and
    # a child inherits that (then Ctrl-C cannot reach the runner): give it SIGINT's
    # default, as a terminal's foreground command has.
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=_default_sigint)
    for line in proc.stdout:
        if "programming" in line:  # the network exists now
            return proc
    raise AssertionError(f"runner ended early: {proc.wait()}")


def test_ctrl_c_tears_everything_down(tmp_path):
    proc = _start(tmp_path)
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, rest
    assert "interrupted" in rest and rest.strip().splitlines()[-1].startswith("results: ")
    assert not find_leftovers()


def test_a_reader_that_goes_away_leaves_the_run_to_finish_and_tear_down(tmp_path):
    # `make run-experiment | head`: once the pipe's reader is gone, every line the run
    # writes fails; a run that stopped there kept its fabric (48 BMv2 switches once).
    proc = _start(tmp_path)
    proc.stdout.close()  # the reader goes, the fabric up
    assert proc.wait(timeout=180) == 0
    assert not find_leftovers()
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((folder / "summary.json").read_text())["ok"]


def test_kill_9_leftovers_are_removed_and_the_next_run_works(tmp_path):
    proc = _start(tmp_path)
    proc.kill()
    proc.wait()
    # Node shells exit when the runner's pipes close; interfaces in the root namespace
    # (BMv2 ports, or a crash of `ip link add`) would stay: make one such leftover of the
    # killed run's fabric, and one of a fabric it never had (another tool's, by the
    # testbed's names), which is not the next run's to remove.
    for name in ("h0-eth0", "h99-eth0"):
        subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name",
                        name.replace("eth0", "eth9")], check=True)
    assert {"h0-eth0", "h99-eth0"} <= set(find_leftovers().interfaces)
    proc = run_cli(tmp_path, "--topo", "2tier-2plane", "--dataplane", "kernel")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "removed leftovers of an earlier run" in proc.stdout
    assert set(find_leftovers().interfaces) == {"h99-eth0", "h99-eth9"}
    cleanup()
    assert not find_leftovers()


def long_scenario(tmp_path) -> Path:
    """A run that moves 40 MB over h0's two 20 Mbit/s planes: eight seconds or more of
    traffic, time enough for what a test does to it while it runs."""
    long = tmp_path / "long.yaml"
    long.write_text(yaml.safe_dump({
        "name": "long", "workload": "transfer", "transports": ["mrc"], "timeout_s": 120,
        "params": {"src": 0, "dst": 3, "message_bytes": 40_000_000}}))
    return long


def test_a_second_run_while_one_is_active_stops_at_once_and_the_first_completes(tmp_path):
    long = long_scenario(tmp_path)
    first = _start(tmp_path / "first", "--scenario", str(long))  # its network exists now
    second = run_cli(tmp_path / "second", "--topo", "2tier-2plane", "--dataplane", "kernel",
                     timeout=60)
    assert second.returncode == 2, second.stdout + second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {first.pid}" in lines[0], lines
    assert str(tmp_path / "first") in lines[0]  # the active run's results folder
    assert not (tmp_path / "second").exists() or not any((tmp_path / "second").iterdir())
    # The other entry points that build fabrics are refused the same way, at once,
    # and take nothing of the first run's fabric with them.
    shells = set(find_leftovers().shells)
    for module in ("bench.agent_throughput", "experiments.run.calibration"):
        started = time.monotonic()
        other = subprocess.run([sys.executable, "-m", module], cwd=REPO, capture_output=True,
                               text=True, timeout=60)
        took = time.monotonic() - started
        assert other.returncode == 2, (module, other.stdout + other.stderr)
        lines = other.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0], (module, lines)
        assert took < 1.0 + import_s(module), (module, took)
    assert set(find_leftovers().shells) == shells
    rest = first.communicate(timeout=240)[0]
    assert first.returncode == 0, rest
    assert "results: " in rest and not find_leftovers()


def import_s(module: str) -> float:
    """How long this machine takes now to start Python and import `module`: a refusal's
    time is counted from when the command could first act (a quiet 2-core machine
    imports the bench in 0.3 s; a busy one, several times that)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=REPO, check=True)
    return time.monotonic() - started


def test_a_run_whose_network_disappears_ends_within_seconds_saying_so(tmp_path):
    long = long_scenario(tmp_path)
    run = _start(tmp_path, "--scenario", str(long))
    for line in run.stdout:
        if "mrc:" in line or "sending" in line or "transfer" in line:
            break
    time.sleep(1.0)  # the transfer is under way
    for pid in find_leftovers().shells:  # the namespaces removed from outside
        os.kill(pid, signal.SIGKILL)
    gone_at = time.monotonic()
    rest = run.communicate(timeout=60)[0]
    assert time.monotonic() - gone_at < 10, rest
    assert run.returncode == 1, rest
    said = [line for line in rest.splitlines() if "network disappeared" in line]
    assert len(said) == 1, rest
    assert not find_leftovers()


def test_sigterm_ends_a_run_within_seconds(tmp_path):
    long = long_scenario(tmp_path)
    run = _start(tmp_path, "--scenario", str(long))
    time.sleep(2.0)
    run.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    rest = run.communicate(timeout=60)[0]
    assert time.monotonic() - sent < 10, rest
    assert run.returncode == 130 and "interrupted (SIGTERM)" in rest, rest
    assert not find_leftovers()


def test_the_showcase_checks_every_path_then_ends_with_the_verdict(tmp_path):
    proc = run_cli(tmp_path, "--topo", "2tier-2plane", "--dataplane", "kernel",
                   "--scenario", "showcase")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    checked = [line.split("paths: ")[1].split()[0] for line in lines if "paths: " in line]
    assert len(checked) == 1 and checked[0].split("/")[0] == checked[0].split("/")[1], lines
    assert any("mrc: slowdown" in line for line in lines)
    assert any("roce-8: slowdown" in line for line in lines)
    verdict = [line for line in lines[-3:] if "verdict: " in line]
    assert len(verdict) == 1, lines[-3:]
    assert "report: " in lines[-2] and lines[-1].startswith("results: ")
    folder = Path(lines[-1][len("results: "):])
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["ok"] and summary["paths_ok"] == summary["paths_checked"]
    assert (folder / "report.md").is_file() and (folder / "goodput.png").is_file()
    assert not find_leftovers()
