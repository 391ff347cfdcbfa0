"""A real BMv2 switch running p4src/mrc_switch.p4, driven by PTF, for the P4 tests.

The `switch` fixture compiles the program, creates four veth pairs (switch side
`mrcp4-s<N>`, test side `mrcp4-t<N>`), starts simple_switch_grpc on the switch sides
with priority queues and programs it over P4Runtime as T0 `p0t0r0` of 2tier-2plane
(ports 0-1 face hosts h0 and h1, ports 2-3 go up to the two T1s). The `ptf` fixture
is a PTF dataplane on the test sides (PTF port N = switch port N), with what
`ptf.testutils` needs from a test. Every test starts with empty capture queues and
the switch's queues as simple_switch starts them, whatever the previous test did.
Everything is removed in `finally`.

Skipped, with the reason, where p4c-bm2-ss or simple_switch_grpc is missing or not root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hosts.protocol import DATA_FRAME_BYTES, link_mbit

PORTS = 4
SWITCH = "p0t0r0"
GRPC_PORT, THRIFT_PORT = 28551, 9551  # below the ephemeral range, as the fabric's
# simple_switch's defaults, which every test finds: no rate limit, 64 packets per queue.
UNLIMITED_PPS, DEFAULT_DEPTH = 0, 64


def skip_reason(tools: tuple[str, ...], root: bool) -> str | None:
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if "simple_switch_CLI" in tools:
        try:
            import thrift  # noqa: F401 - what simple_switch_CLI needs (topologies/bmv2.py)
        except ImportError:
            return "Python's thrift module is missing (apt-get install python3-thrift)"
    if root and os.geteuid() != 0:
        return "needs root (veth interfaces)"
    return None


# Compiling needs only p4c; everything else needs a running switch.
COMPILE_SKIP = skip_reason(("p4c-bm2-ss",), root=False)
SWITCH_SKIP = skip_reason(("p4c-bm2-ss", "simple_switch_grpc", "simple_switch_CLI"), root=True)


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # pytest calls this hook with every collected item: only this folder's need BMv2.
    for item in items:
        if not Path(item.path).resolve().is_relative_to(HERE):
            continue
        reason = COMPILE_SKIP if item.get_closest_marker("compile_only") else SWITCH_SKIP
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def cli(commands: list[str]) -> str:
    from topologies.bmv2 import run_cli

    return run_cli(THRIFT_PORT, commands, "the test switch")


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    from controller.p4info import P4Info
    from controller.program import program_switch
    from controller.tables import all_tables
    from experiments.dataplanes.bmv2_target import compile_program
    from tests.fabrics import with_thresholds
    from topologies.bmv2 import prepare_ports, wait_for_port
    from topologies.model import load_topology

    build = tmp_path_factory.mktemp("p4build")
    p4info_path, json_path = compile_program(build)
    # The bursts below are sized for a marking step at 16 frames and trimming at 48.
    fabric = with_thresholds(load_topology("2tier-2plane"))
    tables = all_tables(fabric)[SWITCH]
    proc = None
    try:
        for i in range(PORTS):
            # A run killed with -9 leaves its veths behind: start from none.
            subprocess.run(["ip", "link", "del", f"mrcp4-s{i}"], capture_output=True)
            _ip("link", "add", f"mrcp4-s{i}", "type", "veth", "peer", "name", f"mrcp4-t{i}")
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.mrcp4-t{i}.disable_ipv6=1"],
                           capture_output=True)
            for side in ("s", "t"):
                _ip("link", "set", f"mrcp4-{side}{i}", "up")
        prepare_ports([f"mrcp4-s{i}" for i in range(PORTS)])  # as a run's switches
        args = ["simple_switch_grpc", "--device-id", "1", "--thrift-port", str(THRIFT_PORT),
                "--log-file", str(build / "switch"), "--log-level", "info"]
        for i in range(PORTS):
            args += ["-i", f"{i}@mrcp4-s{i}"]
        args += [str(json_path), "--", "--grpc-server-addr", f"127.0.0.1:{GRPC_PORT}",
                 "--priority-queues", "8"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(GRPC_PORT, proc, 20, "simple_switch_grpc")
        p4info = P4Info.load(p4info_path)
        program_switch(f"127.0.0.1:{GRPC_PORT}", 1, p4info, json_path.read_bytes(), tables,
                       log_path=build / "p4runtime.log")
        yield {"fabric": fabric, "tables": tables, "p4info": p4info,
               "grpc": f"127.0.0.1:{GRPC_PORT}", "pid": proc.pid}
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        for i in range(PORTS):
            subprocess.run(["ip", "link", "del", f"mrcp4-s{i}"], capture_output=True)


class PtfHarness:
    """What ptf.testutils needs from a test (the dataplane, two hooks and fail()), and
    the switch's queue settings."""

    def __init__(self, dataplane):
        self.dataplane = dataplane

    def slow(self, port: int, data_pps: int, depth: int = DEFAULT_DEPTH) -> None:
        """Make `port` a link of `data_pps` full frames a second inside BMv2, set up as
        the BMv2 target sets up its links, so its queue builds."""
        from topologies.bmv2 import queue_commands

        cli(queue_commands(port, link_mbit(data_pps, DATA_FRAME_BYTES), depth))

    def before_send(self, pkt, device_number=0, port_number=-1):
        pass

    def at_receive(self, pkt, device_number=0, port_number=-1):
        pass

    def fail(self, message: str) -> None:
        pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def dataplane(switch):
    import ptf
    import ptf.ptfutils

    ptf.config.update({"relax": False, "platform": "linux", "qlen": 1000,
                       "port_map": {(0, i): f"mrcp4-t{i}" for i in range(PORTS)}})
    ptf.ptfutils.default_timeout = 2.0
    ptf.ptfutils.default_negative_timeout = 0.4
    from ptf.dataplane import DataPlane

    plane = DataPlane(ptf.config)
    try:
        for i in range(PORTS):
            plane.port_add(f"mrcp4-t{i}", 0, i)
        ptf.dataplane_instance = plane
        yield plane
    finally:
        plane.kill()
        ptf.dataplane_instance = None


@pytest.fixture
def test(dataplane):
    """A PTF test context on the switch, with clean capture queues and fast ports."""
    dataplane.flush()
    try:
        yield PtfHarness(dataplane)
    finally:
        cli([f"set_queue_rate {UNLIMITED_PPS} {port}" for port in range(PORTS)]
            + [f"set_queue_depth {DEFAULT_DEPTH} {port}" for port in range(PORTS)])


@pytest.fixture(scope="module")
def bmv2_network():
    """2tier-2plane on BMv2, built and programmed as a run does: (network, target)."""
    from experiments.dataplanes.bmv2_target import Bmv2Target
    from experiments.run.cleanup import find_leftovers
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock
    from topologies.model import load_topology

    target = Bmv2Target()
    with FabricLock("pytest: BMv2 fabric") as lock, \
            RunningFabric(load_topology("2tier-2plane"), target, lock) as network:
        yield network, target
    assert not find_leftovers()
